# fit_ssm(weights =): one weight per series, as Python's bulkem.fit(weights = ). One
# compiled model, the weighted AR(2) of the Python tests (tests/test_ssm_weights.py, where
# the engines are checked against the oracle).

weighted_ssm <- function(data, weights, ...) {
  suppressWarnings(classes = "bulkem_not_converged",
    fit_ssm(data, "ar", order = 2, starts = 2, seed = 3, max_iter = 300, tol = 1e-10,
            backend = "cpu", weights = weights, ...))
}

test_that("fit_ssm(weights =) counts each series its weight's times", {
  skip_if_no_bulkem()
  set.seed(21)
  s <- list(ar1_noise(60), ar1_noise(45), ar1_noise(50))
  s[[1]][4] <- NA
  fit <- weighted_ssm(list(a = s, b = s[[3]]), list(a = c(2, 0, 1), b = 1.5))
  expect_identical(fit$summary$n_obs, c(109L, 50L)) # series 2 of weight 0 left out
  expect_equal(fit$summary$sum_weights, c(2 * 59 + 50, 1.5 * 50), tolerance = 1e-14)
  # a weight of 0 leaves the series out: the fit of the others, bit for bit
  alone <- weighted_ssm(list(a = s[c(1, 3)], b = s[[3]]), list(a = c(2, 1), b = 1.5))
  expect_identical(fit$components, alone$components)
  expect_identical(fit$summary$loglik, alone$summary$loglik)
  # integer weights fit as repeated series (from other random starts: the same maximum)
  twice <- weighted_ssm(list(a = s[c(1, 1, 3)], b = s[[3]]), list(a = c(1, 1, 1), b = 1.5))
  expect_equal(fit$summary$loglik, twice$summary$loglik, tolerance = 1e-9)
  expect_equal(fit$components$value, twice$components$value, tolerance = 1e-5)
})

test_that("fit_ssm(weights =) reads a data.frame's weight column; bad weights fault their dataset", {
  skip_if_no_bulkem()
  set.seed(22)
  s <- list(ar1_noise(40), ar1_noise(35))
  long <- data.frame(dataset = "x", series = rep(1:2, c(40, 35)), value = unlist(s),
                     w = rep(c(0.5, 2), c(40, 35)))
  by_col <- weighted_ssm(long, "w")
  by_list <- weighted_ssm(list(x = s), list(x = c(0.5, 2)))
  expect_identical(by_col$components$value, by_list$components$value)
  bad <- suppressWarnings(weighted_ssm(list(x = s, y = s[[1]]), list(x = c(1, -1), y = 1)))
  expect_identical(bad$summary$status[1], "invalid_data")
  expect_match(bad$summary$message[1], "series 1: weight -1", fixed = TRUE)
  expect_error(weighted_ssm(list(x = s, y = s[[1]]), list(c(1, 1))),
               "weights holds 1 entries for 2 dataset(s)", fixed = TRUE)
})
