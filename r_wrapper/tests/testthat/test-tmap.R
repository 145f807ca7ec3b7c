# TMAPs with Erlang branches: fit_tmap() against the same call made in Python
# through reticulate, its input forms, methods, moments, samples, scores and
# messages. Orders c(1, 2, 3) only: the Python tests' kernels (disk cache).

# n_traces traces of n_runs runs each, drawn in Python: the same float64 values
# in R (a list of traces, each a list of numeric vectors) and in Python.
tmap_traces <- function(n_traces = 2L, n_runs = 30L, seed = 1L) {
  py <- lapply(seq_len(n_traces), function(i) {
    py_bulkem()$datasets$simulate_tmap(as.integer(n_runs), seed = as.integer(seed + i),
                                        as_frame = FALSE)
  })
  r <- lapply(py, function(trace) {
    lapply(seq_len(reticulate::py_len(trace)) - 1L, function(k) {
      as.double(unlist(reticulate::py_to_r(reticulate::py_get_item(trace, k)$tolist())))
    })
  })
  list(r = r, py = reticulate::r_to_py(py))
}

quiet_fit <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")

tmap_kw <- list(starts = 2, max_iter = 15, seed = 3, backend = "cpu")

test_that("fit_tmap() gives the tables of Python's fit, traces and starts from 1", {
  skip_if_no_bulkem()
  data <- tmap_traces()
  fit <- quiet_fit(do.call(fit_tmap, c(list(data$r, orders = c(1, 2, 3)), tmap_kw)))
  py <- py_bulkem()$fit(data$py, family = "tmap", orders = reticulate::tuple(1L, 2L, 3L),
                        n_starts = 2L, max_iter = 15L, seed = 3L, backend = "cpu")
  expect_s3_class(fit, "bulkem_tmap")
  expect_named(fit, c("summary", "components", "transitions", "starts", "start_values"))
  s <- fit$summary
  expect_identical(s$trace, 1:2)
  expect_identical(s$n_obs, as.integer(vapply(data$r, function(t) length(unlist(t)), 1L)))
  expect_equal(s$loglik, py_col(py$summary, "loglik"), tolerance = 1e-14)
  expect_identical(s$best_start, as.integer(py_col(py$summary, "best_start") + 1L))
  expect_identical(s$status, py_col(py$summary, "status"))
  comp <- fit$components
  expect_named(comp, c("trace", "branch", "order", "rate", "alpha", "exit"))
  expect_identical(comp$trace, rep(1:2, each = 3L))
  expect_identical(comp$branch, rep(1:3, 2L)) # numbered from 1 in Python already
  expect_identical(comp$order, rep(1:3, 2L))
  for (col in c("rate", "alpha", "exit")) {
    expect_equal(comp[[col]], py_col(py$components, col), tolerance = 1e-14)
  }
  tr <- fit$transitions
  expect_named(tr, c("trace", "from_branch", "to_branch", "pi"))
  expect_identical(tr$trace, rep(1:2, each = 9L))
  expect_equal(tr$pi, py_col(py$transitions, "pi"), tolerance = 1e-14)
  # each branch's row of pi and its exit probability sum to 1
  rows <- tapply(tr$pi, list(tr$trace, tr$from_branch), sum)
  expect_equal(as.vector(t(rows)) + comp$exit, rep(1, 6L), tolerance = 1e-12)
  expect_identical(fit$starts$start, rep(1:2, 2L))
  expect_identical(unique(fit$start_values$start), 1:2)
  expect_named(fit$start_values, c("trace", "start", "branch", "order", "rate", "alpha", "exit"))
  expect_identical(attr(fit, "orders"), 1:3)
  expect_output(print(fit), "bulkem fit: TMAP, 3 Erlang branches of orders 1, 2, 3, 2 traces")
  # standard methods: df = alpha (R - 1) + pi (R x R) + rates (R) = 14
  ll <- logLik(fit)
  expect_identical(attr(ll, "df"), 14L)
  expect_identical(nobs(fit), s$n_obs)
  expect_equal(BIC(fit), s$bic, tolerance = 1e-12)
  cf <- coef(fit)
  expect_identical(dim(cf), c(2L, 15L))
  expect_identical(colnames(cf)[c(1, 4, 7, 8, 15)],
                   c("alpha[1]", "rate[1]", "pi[1,1]", "pi[1,2]", "pi[3,3]"))
  p2 <- reticulate::py_to_r(reticulate::py_get_item(py$params(1L), "pi")$tolist())
  expect_equal(unname(cf[2, 7:15]), as.numeric(unlist(p2)), tolerance = 1e-14) # row-major
  params <- tmap_params(fit, 2)
  expect_named(params, c("alpha", "pi", "rates"))
  expect_equal(params$pi, matrix(unlist(p2), 3, byrow = TRUE), tolerance = 1e-14)
  expect_equal(params$rates, comp$rate[4:6])
  expect_identical(as.data.frame(fit, table = "transitions"), tr)
  sub <- fit[2]
  expect_s3_class(sub, "bulkem_tmap")
  expect_identical(sub$summary$trace, 2L)
  expect_identical(unique(sub$transitions$trace), 2L)
  expect_identical(nrow(sub$start_values), 6L)
  expect_error(fit[5], "This fit has no trace 5; its traces are 1, 2.", fixed = TRUE)
  # a fitted TMAP starts another: tmap_params() is init's form
  again <- quiet_fit(fit_tmap(data$r[2], init = params, starts = 1, max_iter = 1, tol = 0,
                              backend = "cpu"))
  expect_gte(again$summary$loglik, s$loglik[2] - 1e-9 * abs(s$loglik[2]))
  # stopped at max_iter: one warning for the call, in R's words
  expect_warning(fit_tmap(data$r, starts = 1, max_iter = 2, seed = 1, backend = "cpu"),
                 "2 of 2 fits did not converge", class = "bulkem_not_converged")
})

test_that("fit_tmap() takes a long data.frame, named traces, and one trace as a list of runs", {
  skip_if_no_bulkem()
  data <- tmap_traces()
  base <- quiet_fit(do.call(fit_tmap, c(list(data$r), tmap_kw)))
  named <- quiet_fit(do.call(fit_tmap, c(list(list(x = data$r[[1]], y = data$r[[2]])),
                                         tmap_kw)))
  expect_identical(named$summary$trace, c("x", "y"))
  expect_identical(unique(named$transitions$trace), c("x", "y"))
  expect_equal(named$summary$loglik, base$summary$loglik, tolerance = 1e-14)
  long <- do.call(rbind, lapply(1:2, function(t) {
    runs <- data$r[[t]]
    data.frame(trace = c("x", "y")[t], run = rep(seq_along(runs), lengths(runs)) * 10L,
               value = unlist(runs))
  }))
  by_frame <- quiet_fit(do.call(fit_tmap, c(list(long), tmap_kw)))
  expect_identical(by_frame$summary$trace, c("x", "y"))
  expect_equal(by_frame$summary$loglik, base$summary$loglik, tolerance = 1e-14)
  # a factor trace column comes back as that factor; other column names
  renamed <- data.frame(who = factor(long$trace, levels = c("y", "x")), r = long$run,
                        gap = long$value)
  by_factor <- quiet_fit(do.call(fit_tmap, c(list(renamed, trace_col = "who", run_col = "r",
                                                  value_col = "gap"), tmap_kw)))
  expect_identical(by_factor$summary$trace, factor(c("y", "x"), levels = c("y", "x")))
  expect_equal(by_factor$summary$loglik, rev(base$summary$loglik), tolerance = 1e-14)
  # a list of runs (numeric vectors) is one trace
  one <- quiet_fit(do.call(fit_tmap, c(list(data$r[[1]]), tmap_kw)))
  expect_identical(one$summary$trace, 1L)
  expect_equal(one$summary$loglik, base$summary$loglik[1], tolerance = 1e-14)
})

test_that("tmap_moments(), tmap_sample() and tmap_score() are Python's, runs from 1", {
  skip_if_no_bulkem()
  data <- tmap_traces()
  fit <- quiet_fit(do.call(fit_tmap, c(list(data$r), tmap_kw)))
  py <- attr(fit, "python")
  m <- tmap_moments(fit)
  expect_named(m, c("trace", "mean_run_length", "mean_interarrival", "corr_x1_x2"))
  expect_identical(m$trace, 1:2)
  want <- reticulate::py_to_r(py$moments(1L))
  expect_equal(m$mean_run_length[2], want$mean_run_length, tolerance = 1e-14)
  expect_equal(m$corr_x1_x2[2], want$corr_x1_x2, tolerance = 1e-14)
  # the paper's eqs 1 and 5 in plain R: E(K) = alpha (I - Pi)^-1 1, E(X) from the means r / rate
  p <- tmap_params(fit, 2)
  n <- solve(t(diag(3) - p$pi), p$alpha)
  expect_equal(m$mean_run_length[2], sum(n), tolerance = 1e-10)
  expect_equal(m$mean_interarrival[2], sum(n * (1:3) / p$rates) / sum(n), tolerance = 1e-10)
  expect_identical(tmap_moments(fit, 2), m[2, , drop = FALSE], ignore_attr = TRUE)
  # samples: the same runs as Python's with that seed
  smp <- tmap_sample(fit, 2, n_runs = 4, seed = 7)
  expect_named(smp, c("run", "step", "value", "branch"))
  runs <- py$sample(1L, n_runs = 4L, seed = 7L)
  want <- lapply(0:3, function(k) {
    as.double(unlist(reticulate::py_to_r(reticulate::py_get_item(runs, k)$tolist())))
  })
  expect_identical(smp$value, unlist(want))
  expect_identical(smp$run, rep(1:4, lengths(want)))
  expect_identical(smp$step, sequence(lengths(want)))
  expect_true(all(smp$branch %in% 1:3))
  # scores
  new <- list(c(0.5, 1.2, 3), 2.5)
  expect_equal(tmap_score(fit, 1, new),
               reticulate::py_to_r(py$score(0L, reticulate::r_to_py(lapply(new, function(u) {
                 bulkem:::py_float_array(u)
               })))), tolerance = 1e-14)
  expect_equal(tmap_score(fit, 1, 2.5), tmap_score(fit, 1, list(2.5)))
  expect_error(tmap_score(fit, 1, list(c(1, 2), c(1, -2))),
               "run 2: 1 of 2 values are not positive and finite (first: -2)", fixed = TRUE)
  expect_error(tmap_score(fit, 1, list(c(1, 2), "a")), "run 2 is text (character)", fixed = TRUE)
  expect_error(tmap_sample(fit, 3), "trace 3 has no fit: no such trace", fixed = TRUE)
  expect_error(tmap_moments(structure(list(), class = "bulkem_hmm")),
               "`fit` must be the result of fit_tmap(), got a bulkem_hmm.", fixed = TRUE)
})

test_that("bad runs make their trace invalid_data, with runs numbered as in R", {
  skip_if_no_bulkem()
  good <- tmap_traces(1L, 10L)$r[[1]]
  bad <- append(good, list(c(1, -2, 3)), after = 2L) # a bad third run, then good's
  data <- list(ok = good, negative = bad, short = list(1))
  fit <- suppressWarnings(fit_tmap(data, starts = 2, max_iter = 5, seed = 1, backend = "cpu"))
  s <- fit$summary
  expect_identical(s$status[2:3], c("invalid_data", "invalid_data"))
  expect_identical(s$message[2], "run 3: 1 of 3 values are not positive and finite (first: -2)")
  expect_match(s$message[3], "too short: 1 values, at least 3", fixed = TRUE)
  expect_warning(quiet_fit(fit_tmap(data, starts = 2, max_iter = 5, seed = 1, backend = "cpu")),
                 "2 of 3 traces are invalid and were not fitted; see $summary$status",
                 fixed = TRUE)
  dropped <- suppressWarnings(fit_tmap(data, starts = 2, max_iter = 5, seed = 1,
                                       backend = "cpu", drop_bad_runs = TRUE))
  expect_match(dropped$summary$message[2], "^dropped 1 of 11 runs \\(first: run 3: 1 of 3")
  expect_equal(dropped$summary$loglik[2], dropped$summary$loglik[1], tolerance = 1e-12)
  expect_identical(dropped$summary$n_obs[2], dropped$summary$n_obs[1])
  expect_error(tmap_params(fit, "negative"),
               "trace \"negative\" has no fit: its status is \"invalid_data\"", fixed = TRUE)
  # a data.frame's run labels name the run
  long <- data.frame(trace = 1L, run = rep(seq_along(bad), lengths(bad)) + 100L,
                     value = unlist(bad))
  by_frame <- suppressWarnings(fit_tmap(long, starts = 2, max_iter = 5, backend = "cpu"))
  expect_match(by_frame$summary$message, "^run 103: 1 of 3 values")
})

test_that("fit_tmap() refuses bad arguments saying what was found and what to do", {
  skip_if_no_bulkem()
  runs <- list(c(1, 2), c(0.5, 3, 1))
  expect_error(fit_tmap(runs, orders = c(1, 0)),
               "`orders` must be a vector of whole numbers >= 1, one per Erlang branch", fixed = TRUE)
  expect_error(fit_tmap(runs, orders = "123"), "got \"123\"", fixed = TRUE)
  expect_error(fit_tmap(runs, orders = c(1, 20000), backend = "cpu"),
               "orders = c(1, 20000): every order must be an integer from 1 to 10000", fixed = TRUE)
  expect_error(fit_tmap(list(runs, c(1, 2))), "data mixes traces (lists of runs, at positions 1)",
               fixed = TRUE)
  expect_error(fit_tmap(list(list(c(1, 2), "x"))), "trace 1, run 2 is text (character)",
               fixed = TRUE)
  expect_error(fit_tmap(runs, drop_bad_runs = "yes"), "`drop_bad_runs` must be TRUE or FALSE")
  expect_error(fit_tmap(data.frame(trace = 1, value = 1:3)),
               "expected a column 'run' naming each row's run within its trace (pass run_col",
               fixed = TRUE)
  expect_error(fit_tmap(runs, init = list(alpha = c(1, 0, 0), pi = matrix(0.4, 3, 3),
                                          rates = c(1, 1, 1)), backend = "cpu"),
               "init$pi rows must sum to at most 1", fixed = TRUE)
  expect_error(fit_tmap(runs, init = c(1, 2)), "`init` must be a named list: alpha")
})
