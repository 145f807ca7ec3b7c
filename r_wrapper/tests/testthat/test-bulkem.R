fields <- c(
  "lambda", "mu", "alpha", "init_lambda", "init_mu", "init_alpha",
  "loglik", "num_iterations", "fit_success"
)

test_that("bulkem() returns the original interface, filled from the Python fit", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 300L, 21L)
  fits <- suppressWarnings(classes = "bulkem_not_converged", # one of 3 stops at 60
    bulkem(data$r, random.inits = 3, max.iters = 60, use.gpu = FALSE, seed = 17))
  expect_type(fits, "list")
  expect_length(fits, 3L)
  expect_null(names(fits))
  py <- py_bulkem()$fit(data$py,
    n_starts = 3L, max_iter = 60L, seed = 17L, backend = "cpu",
    tol = 1e-6, progress = FALSE, accel = FALSE # bulkem(): the original package's plain EM
  )
  status <- py_col(py$summary, "status")
  for (i in seq_along(fits)) {
    f <- fits[[i]]
    expect_named(f, fields)
    best <- py$params(i - 1L)
    init <- py$init_params(i - 1L)
    get <- function(d, key) {
      as.double(unlist(reticulate::py_to_r(reticulate::py_get_item(d, key)$tolist())))
    }
    expect_equal(f$mu, get(best, "mu"), tolerance = 1e-12)
    expect_equal(f$lambda, get(best, "lambda"), tolerance = 1e-12)
    expect_equal(f$alpha, get(best, "weight"), tolerance = 1e-12)
    expect_equal(f$init_mu, get(init, "mu"), tolerance = 1e-12)
    expect_equal(f$init_lambda, get(init, "lambda"), tolerance = 1e-12)
    expect_equal(f$init_alpha, get(init, "weight"), tolerance = 1e-12)
    expect_equal(f$loglik, py_col(py$summary, "loglik")[i], tolerance = 1e-12)
    expect_identical(f$num_iterations, as.integer(py_col(py$summary, "n_iter")[i]))
    expect_identical(f$fit_success, status[i] == "converged")
    expect_length(f$mu, 2L)
    expect_false(is.unsorted(f$mu))
  }
})

test_that("bulkem() keeps names and maps use.gpu to a backend", {
  skip_if_no_bulkem()
  data <- demo_data(2L, 200L, 2L)
  fits <- bulkem(list(a = data$r[[1]], b = data$r[[2]]),
    num.components = 1, use.gpu = FALSE, seed = 1
  )
  expect_named(fits, c("a", "b"))
  expect_length(fits$a$mu, 1L)
  expect_equal(fits$a$alpha, 1)
  auto <- bulkem(data$r[1], num.components = 1, seed = 1) # use.gpu = NA: GPU if any
  expect_equal(auto[[1]]$mu, fits$a$mu, tolerance = 1e-6)
  gpu <- reticulate::import("bulkem.engines.cuda", convert = FALSE)$available()
  has_gpu <- isTRUE(reticulate::py_to_r(reticulate::py_get_item(gpu, 0L)))
  if (has_gpu) {
    on_gpu <- bulkem(data$r[1], num.components = 1, seed = 1, use.gpu = TRUE)
    expect_equal(on_gpu[[1]]$mu, fits$a$mu, tolerance = 1e-6)
  } else {
    expect_error(bulkem(data$r[1], use.gpu = TRUE, seed = 1),
                 "use.gpu = TRUE needs a usable NVIDIA GPU", fixed = TRUE)
  }
  expect_error(bulkem(data$r, use.gpu = "yes"), "`use.gpu` must be TRUE, FALSE or NA")
})
