test_that("Python errors reach R with the Python message", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 4, 5, 6, 7), c(2, 3, 4, 5, 6, 7, 8))
  cases <- list(
    list(
      r = function() fit_mixture(x, components = 0),
      py = "bulkem.fit([np.ones(7)], n_components=0)"
    ),
    list(
      r = function() fit_mixture(x, family = "nope"),
      py = "bulkem.fit([np.ones(7)], family='nope')"
    ),
    list(
      r = function() fit_mixture(x, backend = "gpu"),
      py = "bulkem.fit([np.ones(7)], backend='gpu')"
    ),
    list(
      r = function() fit_mixture(x, tol = -1),
      py = "bulkem.fit([np.ones(7)], tol=-1.0)"
    ),
    list(
      r = function() fit_mixture(x, seed = -3),
      py = "bulkem.fit([np.ones(7)], seed=-3)"
    ),
    list(
      r = function() fit_mixture(list(c("a", "b")), starts = 1),
      py = "bulkem.fit([['a', 'b']], n_starts=1)"
    ),
    list(
      r = function() fit_mixture(x, starts = 1, init = list(
        weight = rbind(c(.5, .5), c(.5, .5)), mu = rbind(1:2, 1:2), lambda = rbind(1:2, 1:2)
      )),
      py = paste0(
        "bulkem.fit([np.ones(7)], n_starts=1, init={'weight': [[.5, .5], [.5, .5]], ",
        "'mu': [[1, 2], [1, 2]], 'lambda': [[1, 2], [1, 2]]})"
      )
    ),
    list(
      r = function() fit_mixture(x, init = list(mu = c(1, 2))),
      py = "bulkem.fit([np.ones(7)], init={'mu': [1, 2]})"
    ),
    list(
      r = function() fit_mixture(list(c(1, NA, 3, 4, 5, 6, 7)), strict = TRUE),
      py = "bulkem.fit([[1, np.nan, 3, 4, 5, 6, 7]], strict=True)"
    ),
    list(
      r = function() fit_mixture(data.frame(id = 1:7, value = 1:7)),
      py = "import pandas as pd; bulkem.fit(pd.DataFrame({'id': range(1, 8), 'value': range(1, 8)}))"
    ),
    list(
      r = function() fit_mixture(list()),
      py = "bulkem.fit([])"
    )
  )
  for (case in cases) {
    msg <- python_message(case$py)
    expect_type(msg, "character")
    err <- tryCatch(case$r(), error = function(e) e)
    expect_s3_class(err, "bulkem_python_error")
    expect_identical(conditionMessage(err), msg, info = case$py)
  }
})

test_that("counts and seeds must be whole numbers and go to Python as integers", {
  skip_if_no_bulkem()
  x <- c(1, 2, 3, 4, 5, 6, 7, 8, 9)
  expect_error(fit_mixture(x, components = 2.5), "`components` must be one whole number")
  expect_error(fit_mixture(x, starts = NA), "`starts` must be one whole number")
  expect_error(fit_mixture(x, seed = "1"), "`seed` must be one whole number")
  expect_error(fit_mixture(x, max_iter = c(1, 2)), "`max_iter` must be one whole number")
  expect_identical(bulkem:::py_int(3, "n"), 3L)
  big <- bulkem:::py_int(2^40, "seed")
  expect_identical(reticulate::py_str(big), "1099511627776")
  fit <- fit_mixture(x, components = 1, starts = 1, seed = 2^40, backend = "cpu")
  expect_equal(attr(fit, "seed"), 2^40)
})

test_that("R-side structure errors are clear", {
  skip_if_no_bulkem()
  expect_error(fit_mixture(list(a = 1:9, 2:10)), "some names empty")
  expect_error(fit_mixture(list(a = 1:9, a = 2:10)), "duplicated names")
  expect_error(fit_mixture(matrix(1:10, 5)), "is a matrix")
  expect_error(fit_mixture(NULL), "datasets is NULL")
  expect_error(fit_mixture(mean), "datasets is a function")
  expect_error(fit_mixture(1:9, init = 1), "`init` must be a named list")
})

test_that("NA values make that dataset invalid_data and the rest is fitted", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 200L, 13L)
  x <- data$r
  x[[2]][5] <- NA
  expect_warning(
    fit <- fit_mixture(x, starts = 2, seed = 6, backend = "cpu"),
    "1 of 3 datasets are invalid"
  )
  s <- fit$summary
  expect_identical(s$status[2], "invalid_data")
  expect_match(s$message[2], "1 of 200 values is NaN or infinite", fixed = TRUE)
  expect_true(all(s$status[-2] %in% c("converged", "max_iter")))
  expect_false(2L %in% fit$components$dataset)
  expect_true(is.na(s$best_start[2]))
  expect_true(is.na(s$n_iter[2]))
  # the other datasets are fitted exactly as without the bad one
  clean <- fit_mixture(x[-2], starts = 2, seed = 6, backend = "cpu")
  expect_equal(s$loglik[-2], clean$summary$loglik)
  # same through the original interface; integer NA and an all-NA dataset too
  expect_warning(
    fits <- bulkem(list(x[[1]], c(1L, NA, 3L, 4L, 5L, 6L, 7L), c(NA, NA)), seed = 6),
    "2 of 3 datasets are invalid"
  )
  expect_false(fits[[2]]$fit_success)
  expect_true(all(is.na(fits[[2]]$mu)))
  expect_length(fits[[3]]$lambda, 2L)
  expect_true(is.na(fits[[3]]$loglik))
  expect_true(all(is.finite(fits[[1]]$mu)))
  # NaN, Inf and non-positive values are treated alike
  expect_warning(
    f2 <- fit_mixture(list(c(1, 2, Inf, 4, 5, 6), c(1, 2, -3, 4, 5, 6), x[[1]]), starts = 1),
    "2 of 3 datasets are invalid"
  )
  expect_match(f2$summary$message[1], "1 of 6 values is NaN or infinite", fixed = TRUE)
  expect_match(f2$summary$message[2], "value is <= 0")
})
