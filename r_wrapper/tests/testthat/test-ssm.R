test_that("fit_ssm() fits AR(p) plus noise and local levels to series, as Python", {
  skip_if_no_bulkem()
  set.seed(9)
  data <- list(a = list(ar1_noise(150), ar1_noise(120)), b = ar1_noise(200))
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

test_that("fitted() is the smoothed signal of a dataset's series, residuals() the rest", {
  skip_if_no_bulkem()
  set.seed(9)
  data <- list(a = list(ar1_noise(150), ar1_noise(120)), b = ar1_noise(200))
  data$a[[2]][7] <- NA
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  fit <- quiet(fit_ssm(data, "ar", order = 1, starts = 2, seed = 4, backend = "cpu"))
  f <- fitted(fit, "a")
  expect_length(f, 270L) # the series one after the other
  expect_equal(f, c(ssm_smooth(fit, "a", 1)$mean, ssm_smooth(fit, "a", 2)$mean))
  py <- attr(fit, "python")
  expect_equal(f[151:270], py_col(py$smooth("a", 1L), "mean"), tolerance = 1e-14)
  r <- residuals(fit, "a")
  expect_equal(r, unlist(data$a) - f)
  expect_identical(which(is.na(r)), 157L) # no residual at the missing step
  every <- fitted(fit)
  expect_named(every, c("a", "b"))
  expect_identical(every$b, fitted(fit, "b"))
  expect_identical(residuals(fit)$b, residuals(fit, "b"))
  expect_identical(fitted(fit["b"]), fitted(fit, "b"))
  # a local level from a data.frame of one series per dataset, against an R smoother
  level <- function(n) cumsum(stats::rnorm(n, sd = 0.5)) + stats::rnorm(n)
  long <- data.frame(dataset = rep(c("x", "y"), c(80, 60)), value = c(level(80), level(60)))
  ll <- quiet(fit_ssm(long, "local_level", starts = 2, seed = 1, backend = "cpu"))
  cf <- coef(ll)["y", ]
  y <- long$value[long$dataset == "y"]
  # Rauch-Tung-Striebel for x[1] ~ N(level0, state_var), x[t+1] = x[t] + w, y[t] = x[t] + v
  n <- length(y)
  mp <- pp <- mf <- pf <- numeric(n)
  m <- cf[["level0"]]
  p <- cf[["state_var"]]
  for (t in seq_len(n)) {
    mp[t] <- m
    pp[t] <- p
    k <- p / (p + cf[["obs_var"]])
    m <- m + k * (y[t] - m)
    p <- (1 - k) * p
    mf[t] <- m
    pf[t] <- p
    p <- p + cf[["state_var"]]
  }
  ms <- mf
  for (t in (n - 1):1) ms[t] <- mf[t] + pf[t] / pp[t + 1] * (ms[t + 1] - mp[t + 1])
  expect_equal(fitted(ll, "y"), ms, tolerance = 1e-9)
  expect_equal(residuals(ll, "y"), y - ms, tolerance = 1e-9)
  expect_identical(lengths(fitted(ll)), c(x = 80L, y = 60L))
})

test_that("fit_ssm(prior = \"diffuse\") fits the local level's exact diffuse prior, as Python", {
  skip_if_no_bulkem()
  nile <- as.numeric(datasets::Nile)
  fit <- fit_ssm(nile, "local_level", prior = "diffuse", starts = 10, max_iter = 2000,
                 tol = 1e-10, seed = 1, backend = "cpu")
  expect_identical(fit$summary$status, "converged")
  # statsmodels' UnobservedComponents(nile, "llevel", use_exact_diffuse=True) maximum
  expect_equal(fit$summary$loglik, -633.4645636362, tolerance = 1e-6)
  expect_identical(fit$components$parameter, c("state_var", "obs_var")) # no level0
  expect_identical(colnames(coef(fit)), c("state_var", "obs_var"))
  expect_output(print(fit), "bulkem fit: local level (random walk plus noise), 1 dataset",
                fixed = TRUE)
  # a diffuse fit saved and read back makes its Python model again with the same prior
  sm <- ssm_smooth(fit, 1)
  score <- ssm_score(fit, 1, nile[1:30])
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  back <- readRDS(file)
  expect_true(reticulate::py_is_null_xptr(attr(back, "python")))
  expect_identical(ssm_smooth(back, 1), sm)
  expect_identical(ssm_score(back, 1, nile[1:30]), score)
  expect_identical(fitted(back), sm$mean)
  # the default prior, given or not, is the fitted one: level0 a parameter
  expect_identical(unique(fit_ssm(nile, "local_level", prior = "fitted", starts = 2,
                                  max_iter = 2000, seed = 1,
                                  backend = "cpu")$components$parameter),
                   c("level0", "state_var", "obs_var"))
  expect_error(fit_ssm(nile, "ar", prior = "diffuse"),
               "prior = \"diffuse\" is for model = \"local_level\"", fixed = TRUE)
  expect_error(fit_ssm(nile, "local_level", prior = "flat"),
               "`prior` must be \"fitted\" (the first level N(level0, state_var), level0 fitted) or \"diffuse\" (a flat prior, no level0), got \"flat\".",
               fixed = TRUE)
  expect_error(fit_ssm(nile, "local_level", prior = NA), "`prior` must be \"fitted\"",
               fixed = TRUE)
})
