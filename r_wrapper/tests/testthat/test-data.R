test_that("the BMI data ship with the package (2107 values, as in mixsmsn)", {
  expect_s3_class(bmi, "data.frame")
  expect_named(bmi, "bmi")
  expect_equal(nrow(bmi), 2107L)
  expect_true(all(bmi$bmi > 0))
  expect_equal(bmi$bmi[1:3], c(30.94, 30.62, 25.57))
  # the same values as Python's bulkem.datasets.load_bmi(), read from any folder
  skip_if_no_bulkem()
  withr_local_wd(tempdir(), {
    py <- py_bulkem()$datasets$load_bmi()
    expect_identical(as.double(unlist(reticulate::py_to_r(py$tolist()))), bmi$bmi)
  })
})
