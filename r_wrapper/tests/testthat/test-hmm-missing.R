# Missing observations in hidden Markov model sequences: an NA step crosses to Python as
# NaN and is marginalised there (its emission factor is 1). Checked against a forward
# recursion written here that skips the emission at NA steps.

# log p(sequences) by the scaled forward algorithm; emit(x) gives the states' emission
# probabilities of one observed value, and an NA step gets none.
forward_loglik <- function(seqs, startprob, transmat, emit) {
  total <- 0
  for (s in seqs) {
    alpha <- startprob
    for (t in seq_along(s)) {
      if (t > 1L) alpha <- as.vector(alpha %*% transmat)
      if (!is.na(s[t])) alpha <- alpha * emit(s[t])
      total <- total + log(sum(alpha))
      alpha <- alpha / sum(alpha)
    }
  }
  total
}

# Two datasets of three sequences of symbols 0..2 (integer vectors, as sample() gives),
# a few steps NA each (the first step of one sequence too).
missing_symbols <- function() {
  set.seed(41)
  one <- function(n) {
    state <- 1L
    out <- integer(n)
    for (t in seq_len(n)) {
      if (stats::runif(1) < 0.1) state <- 3L - state
      out[t] <- sample(0:2, 1, prob = if (state == 1L) c(0.7, 0.2, 0.1) else c(0.1, 0.2, 0.7))
    }
    out[sample(n, 6)] <- NA
    out
  }
  data <- list(a = list(one(80), one(60), one(70)), b = list(one(90), one(50), one(75)))
  data$a[[2]][1] <- NA
  data
}

categorical_emit <- function(emissionprob) function(v) emissionprob[, v + 1]

test_that("a categorical HMM takes NA steps: marginalised, n_obs counts the observed ones", {
  skip_if_no_bulkem()
  data <- missing_symbols()
  n_na <- vapply(data, function(d) sum(is.na(unlist(d))), integer(1))
  n_all <- vapply(data, function(d) length(unlist(d)), integer(1))
  expect_true(all(n_na >= 18L) && is.integer(data$a[[1]]))
  fit <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(data, 2, symbols = 3, starts = 3, seed = 2, backend = "cpu"))
  s <- fit$summary
  expect_true(all(s$status %in% c("converged", "max_iter")))
  expect_identical(s$n_obs, unname(n_all - n_na))
  # the fitted log-likelihood is the forward recursion's at the fitted parameters
  for (id in c("a", "b")) {
    p <- hmm_params(fit, id)
    expected <- forward_loglik(data[[id]], p$startprob, p$transmat,
                               categorical_emit(p$emissionprob))
    expect_lt(abs(s$loglik[s$dataset == id] / expected - 1), 1e-9)
    expect_equal(hmm_score(fit, id, data[[id]]), expected, tolerance = 1e-10)
  }
  # at given parameters: fit_hmm(max_iter = 0, init =) and loglik_at()
  p <- list(startprob = c(0.6, 0.4), transmat = matrix(c(0.85, 0.2, 0.15, 0.8), 2),
            emissionprob = rbind(c(0.6, 0.3, 0.1), c(0.2, 0.2, 0.6)))
  expected <- vapply(data, function(d) {
    forward_loglik(d, p$startprob, p$transmat, categorical_emit(p$emissionprob))
  }, numeric(1))
  at <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(data, 2, symbols = 3, starts = 1, max_iter = 0, init = p, seed = 1,
            backend = "cpu", reorder = FALSE))
  expect_identical(at$summary$status, c("max_iter", "max_iter"))
  expect_identical(at$summary$n_obs, unname(n_all - n_na))
  expect_lt(max(abs(at$summary$loglik / unname(expected) - 1)), 1e-10)
  ll <- loglik_at(data, "hmm", p, emission = "categorical", n_symbols = 3, backend = "cpu")
  expect_identical(ll$status, c("ok", "ok"))
  expect_identical(ll$n_obs, unname(n_all - n_na))
  expect_lt(max(abs(ll$loglik / unname(expected) - 1)), 1e-10)
  # the same sequences as factors (NA kept), a double vector, a long data.frame
  lv <- c("lo", "mid", "hi")
  as_factor <- lapply(data, function(d) lapply(d, function(v) factor(lv[v + 1L], levels = lv)))
  by_factor <- loglik_at(as_factor, "hmm", p, emission = "categorical", backend = "cpu")
  expect_equal(by_factor$loglik, ll$loglik, tolerance = 1e-12)
  as_double <- lapply(data, function(d) lapply(d, as.double))
  expect_equal(loglik_at(as_double, "hmm", p, n_symbols = 3, backend = "cpu")$loglik,
               ll$loglik, tolerance = 1e-12)
  long <- do.call(rbind, lapply(names(data), function(id) {
    do.call(rbind, lapply(seq_along(data[[id]]), function(k) {
      data.frame(dataset = id, sequence = k, value = data[[id]][[k]])
    }))
  }))
  expect_true(is.integer(long$value) && anyNA(long$value))
  by_frame <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(long, 2, symbols = 3, starts = 1, max_iter = 0, init = p, seed = 1,
            backend = "cpu", reorder = FALSE))
  expect_equal(by_frame$summary$loglik, at$summary$loglik, tolerance = 1e-12)
  expect_identical(by_frame$summary$n_obs, at$summary$n_obs)
  # the methods on a sequence with NA steps: one state per step, NA ones included
  seq1 <- data$a[[1]]
  dec <- hmm_decode(fit, "a", seq1)
  expect_length(dec$path, length(seq1))
  expect_true(all(dec$path %in% 1:2))
  post <- hmm_posterior(fit, "a", seq1)
  expect_identical(dim(post), c(length(seq1), 2L))
  expect_equal(unname(rowSums(post)), rep(1, length(seq1)))
  # (a fit of factors: its methods take factors with NA too)
  fit_f <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(as_factor, 2, starts = 1, max_iter = 0, init = p, seed = 1, backend = "cpu",
            reorder = FALSE))
  expect_equal(fit_f$summary$loglik, at$summary$loglik, tolerance = 1e-12)
  expect_equal(hmm_score(fit_f, "a", as_factor$a[[1]]),
               forward_loglik(list(seq1), p$startprob, p$transmat,
                              categorical_emit(p$emissionprob)), tolerance = 1e-10)
  expect_identical(hmm_decode(fit_f, "a", as_factor$a[[1]])$path,
                   hmm_decode(at, "a", seq1)$path)
  path <- tempfile(fileext = ".png")
  on.exit(unlink(path), add = TRUE)
  grDevices::png(path, width = 700, height = 450)
  plot(fit, "a", sequence = 2) # (its first step is NA)
  grDevices::dev.off()
  expect_gt(file.size(path), 2000)
  # an infinite value stays invalid; NA alone is not
  bad <- c(data, list(c = list(c(0, 1, Inf, 2, 1, 0, NA, 2))))
  expect_warning(fit_bad <- loglik_at(bad, "hmm", p, n_symbols = 3, backend = "cpu"),
                 "1 of 3 datasets")
  expect_identical(fit_bad$status, c("ok", "ok", "invalid_data"))
  expect_match(fit_bad$message[3], "infinite", fixed = TRUE)
})

test_that("a Poisson HMM takes NA steps: its loglik is the forward recursion's", {
  skip_if_no_bulkem()
  set.seed(43)
  counts <- lapply(1:3, function(k) {
    state <- rep(c(1, 2, 1), each = 40)
    v <- as.double(stats::rpois(120, c(2, 12)[state]))
    v[sample(120, 10)] <- NA
    v
  })
  fit <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(list(x = counts), 2, emission = "poisson", starts = 3, seed = 5, backend = "cpu"))
  expect_true(fit$summary$status %in% c("converged", "max_iter"))
  expect_identical(fit$summary$n_obs, sum(!is.na(unlist(counts))))
  p <- hmm_params(fit, "x")
  expect_true(abs(p$lambdas[1] - 2) < 1 && abs(p$lambdas[2] - 12) < 2)
  expected <- forward_loglik(counts, p$startprob, p$transmat,
                             function(v) stats::dpois(v, p$lambdas))
  expect_lt(abs(fit$summary$loglik / expected - 1), 1e-9)
  given <- list(startprob = c(0.5, 0.5), transmat = matrix(c(0.9, 0.1, 0.1, 0.9), 2),
                lambdas = c(3, 10))
  ll <- loglik_at(list(x = counts), "hmm", given, emission = "poisson", backend = "cpu")
  expect_identical(ll$n_obs, fit$summary$n_obs)
  expect_lt(abs(ll$loglik / forward_loglik(counts, given$startprob, given$transmat,
                                           function(v) stats::dpois(v, given$lambdas)) - 1),
            1e-10)
})
