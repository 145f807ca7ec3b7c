# kalman_loglik() and state_space(): log-likelihoods against a plain R Kalman
# filter, input forms, statuses and messages. Models of the Python tests'
# compiled sizes only: a local level (1 x 1) and an AR(2) in companion form.

# The log marginal likelihood of one series (NA: a missing step) under
# x[t+1] = F x[t] + w, w ~ N(0, Q); y[t] = H x[t] + v, v ~ N(0, R); x[1] ~ N(m0, P0):
# the textbook filter, one observed value per step, written for this test.
r_kalman <- function(y, model) {
  F <- as.matrix(model$F)
  H <- as.matrix(model$H)
  Q <- as.matrix(model$Q)
  R <- model$R
  m <- matrix(model$m0)
  P <- as.matrix(model$P0)
  ll <- 0
  for (t in seq_along(y)) {
    if (!is.na(y[t])) {
      S <- drop(H %*% P %*% t(H)) + drop(R)
      e <- y[t] - drop(H %*% m)
      K <- P %*% t(H) / S
      ll <- ll - 0.5 * (log(2 * pi * S) + e^2 / S)
      m <- m + K * e
      P <- P - K %*% H %*% P
    }
    m <- F %*% m
    P <- F %*% P %*% t(F) + Q
  }
  ll
}

level_model <- function() state_space(F = 1, H = 1, Q = 0.7, R = 0.4, m0 = 1, P0 = 3)

level_series <- function() {
  set.seed(3)
  ys <- lapply(c(60, 25, 1), function(n) cumsum(stats::rnorm(n, sd = 0.8)) + stats::rnorm(n))
  ys[[1]][c(1, 10, 11)] <- NA # a missing first step too
  ys
}

test_that("kalman_loglik() of a local level equals a plain R Kalman filter", {
  skip_if_no_bulkem()
  m <- level_model()
  expect_s3_class(m, "bulkem_state_space")
  expect_identical(m$F, matrix(1))
  expect_identical(m$m0, 1)
  expect_output(print(m), "dim_state = 1, dim_obs = 1")
  ys <- level_series()
  out <- kalman_loglik(ys, m, backend = "cpu")
  expect_s3_class(out, "data.frame")
  expect_named(out, c("series", "loglik", "n_obs", "status", "message"))
  expect_identical(out$series, 1:3)
  expect_identical(out$status, rep("ok", 3L))
  expect_identical(out$n_obs, c(57L, 25L, 1L))
  want <- vapply(ys, r_kalman, numeric(1), model = m)
  expect_equal(out$loglik, want, tolerance = 1e-10)
  # other forms: one vector, a named list, a long data.frame (factor ids come back)
  expect_equal(kalman_loglik(ys[[2]], m, backend = "cpu")$loglik, want[2], tolerance = 1e-10)
  named <- kalman_loglik(stats::setNames(ys, c("a", "b", "c")), m, backend = "cpu")
  expect_identical(named$series, c("a", "b", "c"))
  long <- data.frame(id = factor(rep(c("b", "a", "c"), lengths(ys)), levels = c("c", "b", "a")),
                     y = unlist(ys))
  by_frame <- kalman_loglik(long, m, series_col = "id", value_col = "y", backend = "cpu")
  expect_identical(by_frame$series, factor(c("c", "b", "a"), levels = c("c", "b", "a")))
  expect_equal(by_frame$loglik, want[c(3, 1, 2)], tolerance = 1e-10) # c = 3rd, b = 1st, a = 2nd
  # one model per series
  other <- state_space(F = 1, H = 1, Q = 0.2, R = 1.5, m0 = 0, P0 = 1)
  per <- kalman_loglik(ys[1:2], list(m, other), backend = "cpu")
  expect_equal(per$loglik[2],
               r_kalman(ys[[2]], list(F = 1, H = 1, Q = 0.2, R = 1.5, m0 = 0, P0 = 1)),
               tolerance = 1e-10)
  expect_equal(per$loglik[1], want[1], tolerance = 1e-10)
})

test_that("an AR(2) in companion form gets its stationary prior and the R filter's likelihood", {
  skip_if_no_bulkem()
  phi <- c(0.6, -0.2)
  ar2 <- state_space(F = rbind(phi, c(1, 0)), H = c(1, 0), Q = diag(c(1.3, 0)), R = 0.3)
  expect_identical(dim(ar2$H), c(1L, 2L))
  expect_identical(ar2$m0, c(0, 0))
  # P0 solves P0 = F P0 F' + Q and holds the AR(2) autocovariances
  expect_equal(ar2$P0, ar2$F %*% ar2$P0 %*% t(ar2$F) + ar2$Q, tolerance = 1e-12)
  acf <- stats::ARMAacf(ar = phi, lag.max = 1)
  expect_equal(ar2$P0[1, 2] / ar2$P0[1, 1], unname(acf[2]), tolerance = 1e-12)
  set.seed(5)
  ys <- lapply(c(80, 40), function(n) {
    as.numeric(stats::arima.sim(list(ar = phi), n, sd = sqrt(1.3))) + stats::rnorm(n, sd = 0.5)
  })
  ys[[2]][7] <- NA
  out <- kalman_loglik(ys, ar2, backend = "cpu")
  want <- vapply(ys, r_kalman, numeric(1), model = ar2)
  expect_equal(out$loglik, want, tolerance = 1e-10)
  expect_identical(out$n_obs, c(80L, 39L))
  # the same model through Python's own constructor
  py_model <- py_bulkem()$StateSpace$ar(reticulate::r_to_py(phi), sigma2 = 1.3, obs_var = 0.3)
  py_ll <- py_bulkem()$kalman_loglik(reticulate::r_to_py(lapply(ys, bulkem:::py_float_array)),
                                     py_model, backend = "cpu")
  expect_equal(out$loglik, py_col(py_ll, "loglik"), tolerance = 1e-12)
})

test_that("bad series get their own status; the messages are R's", {
  skip_if_no_bulkem()
  m <- level_model()
  good <- level_series()[[2]]
  out <- kalman_loglik(list(good, numeric(0), c(NA, NA), c(1, Inf, 2)), m, backend = "cpu")
  expect_identical(out$status, c("ok", "invalid_data", "invalid_data", "invalid_data"))
  expect_true(all(is.na(out$loglik[2:4])))
  expect_match(out$message[2], "too short")
  expect_match(out$message[3], "all 2 time steps are missing")
  expect_match(out$message[4], "1 of 3 values are infinite")
  # a known state observed without noise: the innovation variance is 0 at the first step
  exact <- state_space(F = 1, H = 1, Q = 0.7, R = 0, m0 = 0, P0 = 0)
  failed <- kalman_loglik(list(good, good), list(m, exact), backend = "cpu")
  expect_identical(failed$status, c("ok", "failed"))
  expect_match(failed$message[2], "not positive definite at time step 1;", fixed = TRUE)
})

test_that("state_space() and kalman_loglik() refuse bad arguments saying what to do", {
  skip_if_no_bulkem()
  expect_error(state_space(F = matrix(1, 2, 3), H = 1, Q = 1, R = 1),
               "`F` is a 2 x 3 matrix; expected a square matrix", fixed = TRUE)
  expect_error(state_space(F = diag(2) * 0.5, H = c(1, 0, 0), Q = diag(2), R = 1),
               "`H` is a vector of 3 values; expected a k x 2 matrix (dim_obs x dim_state, with ",
               fixed = TRUE)
  expect_error(state_space(F = diag(2) * 0.5, H = c(1, 0), Q = diag(3), R = 1),
               "`Q` is a 3 x 3 matrix; expected a 2 x 2 matrix (dim_state x dim_state, dim_state = 2",
               fixed = TRUE)
  expect_error(state_space(F = diag(2) * 0.5, H = diag(2), Q = diag(2), R = 1),
               "`R` is one number; expected a 2 x 2 matrix (dim_obs x dim_obs, dim_obs = 2 from H)",
               fixed = TRUE)
  expect_error(state_space(F = diag(2) * 0.5, H = c(1, 0), Q = diag(2), R = 1, m0 = 1:3),
               "`m0` must be a numeric vector of 2 values", fixed = TRUE)
  expect_error(state_space(F = NA_real_, H = 1, Q = 1, R = 1), "`F` has 1 NA, NaN or infinite")
  expect_error(state_space(F = diag(2) * 0.5, H = c(1, 0), Q = matrix(c(1, 0.5, 0, 1), 2),
                           R = 1),
               "Q is not symmetric (largest |Q - t(Q)| = 0.5); expected a covariance matrix. Pass (Q + t(Q)) / 2",
               fixed = TRUE)
  expect_error(state_space(F = diag(2), H = c(1, 0), Q = diag(2), R = 1),
               "F has spectral radius 1 (expected < 1 for a stationary process)", fixed = TRUE)
  m <- level_model()
  y <- c(0.1, 0.4, -0.2)
  expect_error(kalman_loglik(list(y), "level"), "`model` must be a model made by state_space()",
               fixed = TRUE)
  expect_error(kalman_loglik(list(y, y), list(m, m, m)), "3 models for 2 series", fixed = TRUE)
  ar2 <- state_space(F = rbind(c(0.6, -0.2), c(1, 0)), H = c(1, 0), Q = diag(c(1, 0)), R = 0.3)
  two <- state_space(F = 0.5, H = matrix(c(1, 1), 2), Q = 1, R = diag(2))
  expect_error(kalman_loglik(list(y), list(m, ar2)), "The models have different sizes")
  expect_error(kalman_loglik(list(y), two),
               "series 1 is a vector; the model observes dim_obs = 2 values per time step")
  expect_error(kalman_loglik(list(cbind(y, y)), m),
               "series 1 is a matrix of 2 columns; the model observes dim_obs = 1 value")
  expect_error(kalman_loglik(list(a = "x"), m), "series 'a' is text (character)", fixed = TRUE)
  expect_error(kalman_loglik(data.frame(id = 1, value = y), m),
               "expected a column 'series' naming each row's series (pass series_col", fixed = TRUE)
  expect_error(kalman_loglik(list(y), m, method = "splash"),
               "method = \"splash\" needs window = n", fixed = TRUE)
  expect_error(kalman_loglik(list(y), m, window = 3),
               "window = 3 is used by method = \"splash\" only", fixed = TRUE)
})
