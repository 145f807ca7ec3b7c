# loglik_at(): bulkem.loglik from R. Inverse-Gaussian mixtures of 2 components
# only (the kernels the other tests compile).

ig_params <- list(weight = c(0.3, 0.7), mu = c(0.7, 1.6), lambda = c(1.5, 3))

# The mixture log-likelihood of x in plain R (bulkem's mu is the mean, lambda the shape).
ig_mix_loglik <- function(x, p) {
  dens <- Reduce(`+`, lapply(seq_along(p$weight), function(j) {
    p$weight[j] * statmod::dinvgauss(x, mean = p$mu[j], shape = p$lambda[j])
  }))
  sum(log(dens))
}

rel_diff <- function(a, b) max(abs(a - b) / abs(b))

test_that("loglik_at() is the inverse-Gaussian mixture log-likelihood computed in R", {
  skip_if_no_bulkem()
  skip_if_not_installed("statmod")
  set.seed(3)
  x <- lapply(c(40, 70, 90), function(n) statmod::rinvgauss(n, mean = 1, shape = 2))
  out <- loglik_at(x, "invgauss", ig_params, backend = "cpu")
  expect_s3_class(out, "data.frame")
  expect_named(out, c("dataset", "n_obs", "loglik", "status", "message"))
  expect_identical(out$dataset, 1:3)
  expect_identical(out$n_obs, c(40L, 70L, 90L))
  expect_identical(out$status, rep("ok", 3))
  expected <- vapply(x, ig_mix_loglik, numeric(1), p = ig_params)
  expect_lt(rel_diff(out$loglik, expected), 1e-10)
  # one parameter set per dataset, matched by name to a named list of datasets
  other <- list(weight = c(0.5, 0.5), mu = c(0.9, 2), lambda = c(1, 4))
  named <- stats::setNames(x, c("a", "b", "c"))
  per <- loglik_at(named, params = list(c = ig_params, a = other, b = ig_params),
                   backend = "cpu")
  expect_identical(per$dataset, c("a", "b", "c"))
  expected <- c(ig_mix_loglik(x[[1]], other), ig_mix_loglik(x[[2]], ig_params),
                ig_mix_loglik(x[[3]], ig_params))
  expect_lt(rel_diff(per$loglik, expected), 1e-10)
})

test_that("loglik_at() at a fit's own parameters is the fit's log-likelihood", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 120L, 7L)
  fit <- suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(data$r, components = 2, starts = 3, seed = 5, backend = "cpu"))
  expect_true(all(fit$summary$status %in% c("converged", "max_iter")))
  params <- lapply(fit$summary$dataset, function(id) {
    rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
    rows <- rows[order(rows$component), , drop = FALSE]
    list(weight = rows$weight, mu = rows$mu, lambda = rows$lambda)
  })
  out <- loglik_at(data$r, "invgauss", params, backend = "cpu")
  expect_identical(out$status, rep("ok", 3))
  expect_lt(rel_diff(out$loglik, fit$summary$loglik), 1e-9)
})

test_that("an invalid dataset gets status invalid_data and the others are evaluated", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 0.5, 0.7, 1.1), c(1, -2, 3, 4, 5, 6), c(0.4, 1.5, 2, 0.9, 1.3, 2.2))
  expect_warning(
    out <- loglik_at(x, params = ig_params, n_components = 2, backend = "cpu"),
    "1 of 3 datasets are invalid and were not evaluated", fixed = TRUE
  )
  expect_identical(out$status, c("ok", "invalid_data", "ok"))
  expect_match(out$message[2], "<= 0", fixed = TRUE)
  expect_identical(out$message[c(1, 3)], c("", ""))
  expect_true(is.na(out$loglik[2]))
  expect_true(all(is.finite(out$loglik[c(1, 3)])))
})

test_that("bad params raise an error saying what was found and what was expected", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 0.5, 0.7, 1.1), c(0.4, 1.5, 2, 0.9, 1.3, 2.2))
  # checked in R
  expect_error(loglik_at(x), "`params` is missing", fixed = TRUE)
  expect_error(loglik_at(x, params = c(1, 2)),
               "`params` must be a named list of parameter blocks", fixed = TRUE)
  expect_error(loglik_at(x, params = c(1, 2)), "got a numeric (c(1, 2))", fixed = TRUE)
  expect_error(loglik_at(x, params = list(weight = c(0.5, 0.5), mu = c("a", "b"),
                                          lambda = c(1, 1))),
               "params$mu is text (character); expected numbers", fixed = TRUE)
  expect_error(loglik_at(x, params = list(a = ig_params, b = ig_params)),
               "the datasets are not a named list", fixed = TRUE)
  expect_error(loglik_at(x, params = ig_params, n_components = 2.5),
               "`n_components` must be one whole number, got 2.5.", fixed = TRUE)
  # checked in Python, said in R's terms
  err <- tryCatch(loglik_at(x, params = list(weight = c(0.5, 0.5), mu = c(-1, 1),
                                             lambda = c(1, 1)), backend = "cpu"),
                  error = function(e) e)
  expect_s3_class(err, "bulkem_python_error")
  expect_match(conditionMessage(err), "params$mu must be positive", fixed = TRUE)
  err <- tryCatch(loglik_at(x, params = list(weight = c(0.5, 0.5), mu = c(1, 2)),
                            backend = "cpu"), error = function(e) e)
  expect_s3_class(err, "bulkem_python_error")
  expect_match(conditionMessage(err), paste0("params has keys c(\"weight\", \"mu\"); expected ",
                                             "exactly c(\"weight\", \"mu\", \"lambda\")."),
               fixed = TRUE)
  err <- tryCatch(loglik_at(x, params = list(ig_params, ig_params, ig_params),
                            backend = "cpu"), error = function(e) e)
  expect_s3_class(err, "bulkem_python_error")
  expect_match(conditionMessage(err), "params gives 3 parameter sets for 2 datasets",
               fixed = TRUE)
})
