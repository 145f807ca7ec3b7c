# fit_mixture(weights =): one weight per value, as Python's bulkem.fit(weights = ). The
# weighted inverse-Gaussian kernel is the Python tests' (tests/test_weights.py).

weighted_data <- function() {
  set.seed(5)
  x <- list(a = c(statmod::rinvgauss(60, 1, 5), statmod::rinvgauss(60, 4, 20)),
            b = c(statmod::rinvgauss(50, 1, 5), statmod::rinvgauss(50, 4, 20)))
  w <- lapply(x, function(v) stats::runif(length(v), 0.2, 3))
  w$a[1:5] <- 0
  list(x = x, w = w)
}

weighted_fit <- function(x, w, ...) {
  suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(x, components = 2, starts = 2, max_iter = 20, seed = 3, backend = "cpu",
                weights = w, ...))
}

test_that("fit_mixture(weights =) counts each value its weight's times", {
  skip_if_no_bulkem()
  d <- weighted_data()
  fit <- weighted_fit(d$x, d$w)
  expect_equal(fit$summary$sum_weights, unname(vapply(d$w, sum, numeric(1))),
               tolerance = 1e-12)
  expect_identical(fit$summary$n_obs, c(115L, 100L))  # the five of weight 0 left out
  # a weight of 0 leaves the value out: the fit of the others, bit for bit
  kept <- d$w$a > 0
  alone <- weighted_fit(list(a = d$x$a[kept], b = d$x$b), list(a = d$w$a[kept], b = d$w$b))
  expect_identical(fit$components, alone$components)
  expect_identical(fit$summary$loglik, alone$summary$loglik)
})

test_that("fit_mixture(weights =) reads a data.frame's weight column; bad weights fault their dataset", {
  skip_if_no_bulkem()
  d <- weighted_data()
  frame <- data.frame(dataset = rep(c("a", "b"), c(120, 100)), value = unlist(d$x),
                      w = unlist(d$w))
  by_col <- weighted_fit(frame, "w")
  by_list <- weighted_fit(d$x, d$w)
  expect_identical(by_col$components$mu, by_list$components$mu)
  d$w$b[3] <- -1
  bad <- suppressWarnings(weighted_fit(d$x, d$w))
  expect_identical(bad$summary$status[2], "invalid_data")
  expect_match(bad$summary$message[2], "1 of 100 weights are negative")
  expect_error(weighted_fit(d$x, list(d$w$a)), "weights holds 1 dataset")
})
