# accel = NULL / TRUE / FALSE of every fitting function: EM accelerated by
# SQUAREM (Python's bulkem.fit(accel=)), the same maxima as plain EM in fewer
# passes over the data; NULL is the family's default (on for every family; the
# original interface bulkem() runs plain EM).

test_that("accel = TRUE reaches plain EM's maximum of a state-space model in fewer passes", {
  skip_if_no_bulkem()
  nile <- as.numeric(datasets::Nile)
  fit <- function(...) {
    fit_ssm(nile, "local_level", starts = 3, max_iter = 5000, tol = 1e-10, seed = 1,
            backend = "cpu", ...)
  }
  plain <- fit(accel = FALSE)
  fast <- fit(accel = TRUE)
  expect_identical(c(plain$summary$status, fast$summary$status), c("converged", "converged"))
  expect_equal(fast$summary$loglik, plain$summary$loglik, tolerance = 1e-6)
  expect_equal(coef(fast), coef(plain), tolerance = 1e-4)
  expect_lt(fast$summary$n_iter, plain$summary$n_iter)
  # NULL, the default, is the state-space models' default: accelerated
  expect_identical(fit()$summary, fast$summary)
  # AR plus noise, the other state-space model
  set.seed(5)
  z <- ar1_noise(120)
  ar <- function(...) {
    fit_ssm(z, "ar", starts = 3, max_iter = 5000, tol = 1e-10, seed = 1, backend = "cpu", ...)
  }
  plain <- ar(accel = FALSE)
  fast <- ar()
  expect_equal(fast$summary$loglik, plain$summary$loglik, tolerance = 1e-6)
  expect_lt(fast$summary$n_iter, plain$summary$n_iter)
})

test_that("accel = TRUE on a mixture, an HMM and a TMAP reaches plain EM's maximum", {
  skip_if_no_bulkem()
  set.seed(2)
  x <- abs(c(stats::rnorm(150, 10, 2), stats::rnorm(150, 14, 2)))
  mix <- function(...) {
    fit_mixture(x, starts = 3, max_iter = 5000, tol = 1e-10, seed = 1, backend = "cpu", ...)
  }
  plain <- mix(accel = FALSE)
  fast <- mix(accel = TRUE)
  expect_equal(fast$summary$loglik, plain$summary$loglik, tolerance = 1e-6)
  expect_lt(fast$summary$n_iter, plain$summary$n_iter)
  expect_identical(mix()$summary, fast$summary) # NULL: the default, accelerated
  counts <- function(n) stats::rpois(n, ifelse(cumsum(stats::runif(n) < 0.1) %% 2 == 0, 1, 6))
  seqs <- list(a = list(counts(60), counts(50)))
  hmm <- function(...) {
    fit_hmm(seqs, 2, emission = "poisson", starts = 3, max_iter = 5000, tol = 1e-10, seed = 1,
            backend = "cpu", ...)
  }
  plain <- hmm(accel = FALSE)
  expect_equal(hmm(accel = TRUE)$summary$loglik, plain$summary$loglik, tolerance = 1e-6)
  expect_identical(hmm()$summary$loglik, hmm(accel = TRUE)$summary$loglik)
  runs <- lapply(seq_len(20), function(i) stats::rexp(1 + i %% 4))
  tmap <- function(...) {
    fit_tmap(list(t1 = runs), orders = c(1, 1, 2), starts = 3, max_iter = 5000, tol = 1e-10,
             seed = 1, backend = "cpu", ...)
  }
  plain <- tmap(accel = FALSE)
  expect_equal(tmap(accel = TRUE)$summary$loglik, plain$summary$loglik, tolerance = 1e-6)
})

test_that("accel must be NULL, TRUE or FALSE", {
  msg <- function(shown) {
    paste0("`accel` must be NULL (the family's default), TRUE (EM accelerated by SQUAREM) or ",
           "FALSE (plain EM), got ", shown, ".")
  }
  y <- c(1.2, 0.8, 2.5, 1.9, 3.1)
  for (bad in list("yes", NA, c(TRUE, FALSE), 1, logical(0))) {
    shown <- paste(deparse(bad), collapse = "")
    expect_error(fit_mixture(y, accel = bad), msg(shown), fixed = TRUE)
    expect_error(fit_hmm(list(c(0, 1, 1, 0)), 2, accel = bad), msg(shown), fixed = TRUE)
    expect_error(fit_tmap(list(list(y)), accel = bad), msg(shown), fixed = TRUE)
    expect_error(fit_ssm(y, "local_level", accel = bad), msg(shown), fixed = TRUE)
  }
})
