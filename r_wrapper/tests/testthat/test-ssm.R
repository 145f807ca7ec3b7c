test_that("fit_ssm() fits AR(p) plus noise and local levels to series, as Python", {
  skip_if_no_bulkem()
  set.seed(9)
  ar1 <- function(n, phi = 0.7) {
    z <- numeric(n)
    for (t in 2:n) z[t] <- phi * z[t - 1] + stats::rnorm(1)
    z + stats::rnorm(n, sd = 0.5)
  }
  data <- list(a = list(ar1(150), ar1(120)), b = ar1(200))
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  fit <- quiet(fit_ssm(data, "ar", order = 1, starts = 2, seed = 4, backend = "cpu"))
  expect_s3_class(fit, "bulkem_ssm")
  expect_identical(fit$summary$dataset, c("a", "b"))
  expect_identical(fit$summary$n_obs, c(270L, 200L))
  expect_identical(unique(fit$components$parameter), c("phi_1", "state_var", "obs_var"))
  expect_output(print(fit), "bulkem fit: AR\\(1\\) plus noise, 2 datasets")
  cf <- coef(fit)
  expect_identical(colnames(cf), c("phi_1", "state_var", "obs_var"))
  expect_true(all(abs(cf[, "phi_1"] - 0.7) < 0.3))
  expect_equal(BIC(fit), fit$summary$bic, tolerance = 1e-12)
  # the smoothed signal of a dataset's own series (from 1) and of new data; scores
  sm <- ssm_smooth(fit, "a", 2)
  expect_named(sm, c("step", "y", "mean", "var"))
  expect_identical(sm$step, 1:120)
  expect_equal(sm$y, data$a[[2]])
  new <- c(0.1, NA, 0.5, 1.2, 0.8)
  expect_identical(nrow(ssm_smooth(fit, "b", new)), 5L)
  py <- attr(fit, "python")
  expect_equal(ssm_score(fit, "b", data$b),
               reticulate::py_to_r(py$score("b", bulkem:::py_float_array(data$b))))
  # a local level, from a long data.frame
  long <- data.frame(dataset = 1L, series = rep(1:2, c(80, 60)),
                     value = c(cumsum(stats::rnorm(80)), cumsum(stats::rnorm(60))))
  ll <- quiet(fit_ssm(long, "local_level", starts = 2, seed = 1, backend = "cpu"))
  expect_identical(unique(ll$components$parameter), c("level0", "state_var", "obs_var"))
  expect_error(fit_ssm(data, "arma"), "`model` must be \"ar\"", fixed = TRUE)
})
