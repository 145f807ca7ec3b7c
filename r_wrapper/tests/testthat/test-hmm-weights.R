# fit_hmm(weights =) and fit_tmap(weights =): one weight per sequence (run), as Python's
# bulkem.fit(weights = ). The kernels are the Python tests' (tests/test_hmm_weights.py):
# the weighted categorical HMM of 3 states and 4 symbols, the weighted TMAP of orders 1, 2, 3.

hmm_weight_start <- list(
  startprob = c(0.5, 0.3, 0.2),
  transmat = matrix(c(0.7, 0.2, 0.1, 0.2, 0.6, 0.2, 0.1, 0.3, 0.6), 3, byrow = TRUE),
  emissionprob = matrix(c(0.6, 0.2, 0.1, 0.1, 0.1, 0.5, 0.3, 0.1, 0.1, 0.1, 0.2, 0.6), 3,
                        byrow = TRUE)
)

hmm_weighted <- function(data, ...) {
  suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(data, 3, symbols = 4, starts = 1, init = hmm_weight_start, max_iter = 10,
            tol = 0, backend = "cpu", accel = FALSE, ...))
}

test_that("fit_hmm(weights =) counts each sequence its weight's times", {
  skip_if_no_bulkem()
  set.seed(3)
  seqs <- lapply(c(8, 12, 5, 9), function(n) as.double(sample(0:3, n, replace = TRUE)))
  w <- c(2, 1, 0, 3)
  fit <- hmm_weighted(list(a = seqs, b = seqs[1:2]), weights = list(a = w, b = c(1, 1)))
  rep_fit <- hmm_weighted(list(a = rep(seqs, w), b = seqs[1:2]))
  expect_equal(fit$summary$loglik, rep_fit$summary$loglik, tolerance = 1e-10)
  expect_equal(fit$transitions$prob, rep_fit$transitions$prob, tolerance = 1e-9)
  expect_equal(fit$summary$sum_weights, c(sum(w * lengths(seqs)), 20))
  # a long data.frame's weight column, constant within each sequence
  frame <- data.frame(dataset = "a", sequence = rep(seq_along(seqs), lengths(seqs)),
                      value = unlist(seqs), w = rep(w, lengths(seqs)))
  by_col <- hmm_weighted(frame, weights = "w")
  expect_equal(by_col$summary$loglik, fit$summary$loglik[1], tolerance = 1e-12)
  # a bad weight: its dataset invalid, the sequence named as in R
  bad <- suppressWarnings(hmm_weighted(list(a = seqs, b = seqs[1:2]),
                                       weights = list(a = c(2, -1, 0, 3), b = c(1, 1))))
  expect_identical(bad$summary$status[1], "invalid_data")
  expect_match(bad$summary$message[1], "sequence 2: weight -1", fixed = TRUE)
  expect_equal(bad$summary$loglik[2], fit$summary$loglik[2], tolerance = 1e-12)
  expect_error(hmm_weighted(list(a = seqs, b = seqs[1:2]), weights = list(a = w, b = 1)),
               "has 2 sequences but its weights have shape")
})

test_that("fit_tmap(weights =) counts each run its weight's times", {
  skip_if_no_bulkem()
  set.seed(4)
  runs <- lapply(c(3, 1, 4, 2, 2), function(n) stats::rexp(n, 1))
  w <- c(1, 2, 0, 3, 1)
  start <- list(alpha = c(0.5, 0.3, 0.2),
                pi = matrix(c(0.6, 0.2, 0.1, 0.2, 0.5, 0.2, 0.1, 0.3, 0.5), 3, byrow = TRUE),
                rates = c(2, 1, 0.5))
  tmap <- function(data, ...) {
    suppressWarnings(classes = "bulkem_not_converged",
      fit_tmap(data, starts = 1, init = start, max_iter = 8, tol = 0, backend = "cpu",
               accel = FALSE, ...))
  }
  fit <- tmap(runs, weights = w)
  rep_fit <- tmap(rep(runs, w))
  expect_equal(fit$summary$loglik, rep_fit$summary$loglik, tolerance = 1e-10)
  expect_equal(fit$components$rate, rep_fit$components$rate, tolerance = 1e-9)
  frame <- data.frame(trace = 1, run = rep(seq_along(runs), lengths(runs)),
                      value = unlist(runs), w = rep(w, lengths(runs)))
  expect_equal(tmap(frame, weights = "w")$summary$loglik, fit$summary$loglik,
               tolerance = 1e-12)
})

test_that("loglik_at(weights =) is the weighted sum of the sequences' log-likelihoods", {
  skip_if_no_bulkem()
  set.seed(5)
  seqs <- lapply(c(8, 12, 5), function(n) as.double(sample(0:3, n, replace = TRUE)))
  a <- loglik_at(list(seqs), "hmm", hmm_weight_start, backend = "cpu", n_symbols = 4,
                 weights = list(c(2, 1, 0)))
  b <- loglik_at(list(c(seqs[1], seqs[1], seqs[2])), "hmm", hmm_weight_start,
                 backend = "cpu", n_symbols = 4)
  expect_equal(a$loglik, b$loglik, tolerance = 1e-12)
})
