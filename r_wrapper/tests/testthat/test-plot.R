png_file <- function() {
  path <- tempfile(fileext = ".png")
  grDevices::png(path, width = 700, height = 450)
  path
}

expect_png <- function(path) {
  expect_true(file.exists(path))
  expect_identical(readBin(path, "raw", 8L), as.raw(c(0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a)))
  expect_gt(file.size(path), 2000)
}

test_that("plot() draws a dataset's histogram, fitted mixture and components", {
  skip_if_no_bulkem()
  data <- demo_data(2L, 300L, 4L)
  x <- c(data$r, list(c(1, NA)))
  expect_warning(fit <- fit_mixture(x, starts = 3, seed = 8, backend = "cpu"), "1 of 3")
  path <- png_file()
  expect_identical(plot(fit, 2), fit) # invisibly, the fit
  grDevices::dev.off()
  expect_png(path)
  # the first dataset with a fit by default; named datasets; options pass on
  path <- png_file()
  named <- fit_mixture(list(a = data$r[[1]]), starts = 2, seed = 1, backend = "cpu")
  plot(named, breaks = 20, tail = 0, main = "a", legend = FALSE)
  plot(fit)
  grDevices::dev.off()
  expect_png(path)
  expect_error(plot(fit, 3), "dataset 3 has no fit: its status is \"invalid_data\".",
               fixed = TRUE)
  expect_error(plot(fit, c(1, 2)), "`dataset` must be one dataset id")
})

test_that("the curves plot() draws are the fitted density", {
  skip_if_no_bulkem()
  data <- demo_data(1L, 300L, 6L)
  fit <- fit_mixture(data$r, starts = 2, seed = 3, backend = "cpu")
  plotting <- reticulate::import("bulkem.result.plotting", convert = FALSE)
  grid <- c(0.2, 1, 3)
  comp <- bulkem:::py_numbers(plotting$component_densities(
    attr(fit, "python"), 0L, bulkem:::py_float_array(grid)))
  comp <- matrix(comp, nrow = length(grid), byrow = TRUE)
  expect_equal(rowSums(comp), mixture_density(fit, 1, grid), tolerance = 1e-12)
  values <- bulkem:::py_numbers(plotting$dataset_values(attr(fit, "python"), 0L))
  expect_identical(values, data$r[[1]])
})
