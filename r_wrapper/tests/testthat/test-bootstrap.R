# fit_mixture(bootstrap = B): the intervals table against Python's
# bulkem.fit(bootstrap=B) on the same data and seed, the methods that handle a
# fit's tables (print, summary, `[`, as.data.frame, saveRDS), the arguments'
# checks, and mixture_sample(). Small data: 2 datasets of 150 values, 2
# components, 2 starts, 5 refits.

quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")

# One bootstrapped fit, made once for the tests of this file.
boot_cache <- new.env()
boot_fit <- function() {
  if (is.null(boot_cache$fit)) {
    data <- demo_data(2L, 150L, 11L)
    boot_cache$data <- data
    boot_cache$fit <- quiet(fit_mixture(data$r, components = 2, starts = 2, seed = 3,
                                        backend = "cpu", bootstrap = 5))
  }
  boot_cache
}

interval_columns <- c("dataset", "parameter", "estimate", "lower", "upper", "n_boot")

# Each row's estimate from the components table: weight_2 is component 2's
# weight, mean_2_1 (Gaussian) component 2's mean_1.
table_estimates <- function(fit) {
  iv <- fit$intervals
  comp <- fit$components
  vapply(seq_len(nrow(iv)), function(r) {
    parts <- strsplit(iv$parameter[r], "_", fixed = TRUE)[[1]]
    k <- as.integer(parts[2L])
    col <- if (length(parts) == 3L) paste0(parts[1L], "_", parts[3L]) else parts[1L]
    row <- which(as.character(comp$dataset) == as.character(iv$dataset[r]) &
                   comp$component == k)
    comp[[col]][row]
  }, numeric(1))
}

test_that("bootstrap = B adds Python's intervals table, datasets numbered from 1", {
  skip_if_no_bulkem()
  b <- boot_fit()
  fit <- b$fit
  py <- py_bulkem()$fit(b$data$py, n_components = 2L, n_starts = 2L, seed = 3L,
                        backend = "cpu", bootstrap = 5L, progress = FALSE)
  expect_named(fit, c("summary", "components", "starts", "start_values", "intervals"))
  iv <- fit$intervals
  expect_s3_class(iv, "data.frame")
  expect_named(iv, interval_columns)
  expect_identical(nrow(iv), 12L) # 2 datasets x (3 parameters x 2 components)
  expect_identical(iv$dataset, rep(1:2, each = 6L))
  expect_identical(iv$parameter, rep(c("weight_1", "mu_1", "lambda_1", "weight_2", "mu_2",
                                       "lambda_2"), times = 2L))
  expect_type(iv$n_boot, "integer")
  # Python's table, on the same data and seed
  py_iv <- py$intervals$astype(reticulate::dict(dataset = "int64")) # (ids held as objects)
  expect_identical(iv$dataset, as.integer(py_col(py_iv, "dataset") + 1L))
  expect_identical(iv$parameter, py_col(py_iv, "parameter"))
  for (col in c("estimate", "lower", "upper")) {
    expect_equal(iv[[col]], py_col(py_iv, col), tolerance = 1e-12, info = col)
  }
  expect_identical(iv$n_boot, as.integer(py_col(py_iv, "n_boot")))
  expect_true(all(iv$n_boot >= 1L & iv$n_boot <= 5L))
  expect_true(all(is.finite(iv$lower) & is.finite(iv$upper)))
  expect_true(all(iv$lower <= iv$upper))
  # the estimates are the fitted parameters of the components table
  expect_equal(iv$estimate, table_estimates(fit), tolerance = 1e-12)
  expect_identical(attr(fit, "bootstrap"), list(refits = 5L, level = 0.95))
  # the bootstrap leaves the fit as it is without one
  plain <- quiet(fit_mixture(b$data$r, components = 2, starts = 2, seed = 3, backend = "cpu"))
  expect_named(plain, c("summary", "components", "starts", "start_values"))
  expect_null(attr(plain, "bootstrap"))
  expect_equal(unclass(fit)[names(plain)], unclass(plain)[names(plain)])
  # a narrower level: the same refits, inner quantiles
  half <- quiet(fit_mixture(b$data$r, components = 2, starts = 2, seed = 3, backend = "cpu",
                            bootstrap = 5, bootstrap_level = 0.5))
  expect_identical(attr(half, "bootstrap")$level, 0.5)
  expect_equal(half$intervals$estimate, iv$estimate)
  expect_true(all(half$intervals$lower >= iv$lower & half$intervals$upper <= iv$upper))
  expect_true(any(half$intervals$lower > iv$lower))
})

test_that("named datasets, a bad dataset and a Gaussian mixture's intervals", {
  skip_if_no_bulkem()
  b <- boot_fit()
  x <- list(a = b$data$r[[1]], bad = c(1, NA), b = b$data$r[[2]])
  named <- suppressWarnings(fit_mixture(x, components = 2, starts = 2, seed = 3,
                                        backend = "cpu", bootstrap = 5))
  expect_identical(named$summary$status[2], "invalid_data")
  expect_identical(named$intervals$dataset, rep(c("a", "b"), each = 6L)) # fitted ones only
  expect_equal(named$intervals$estimate, table_estimates(named), tolerance = 1e-12)
  # a long data.frame with a factor dataset column: the factor comes back
  long <- data.frame(dataset = factor(rep(c("p", "q"), each = 150L), levels = c("q", "p")),
                     value = unlist(b$data$r))
  byfactor <- quiet(fit_mixture(long, components = 2, starts = 2, seed = 3, backend = "cpu",
                                bootstrap = 5))
  expect_identical(byfactor$intervals$dataset,
                   factor(rep(c("q", "p"), each = 6L), levels = c("q", "p")))
  # two dimensions: mean_<component>_<dimension>, as Python names them (three
  # clusters, three components: the size, M = 3 and D = 2, of a kernel the Python tests
  # compile)
  set.seed(5)
  k <- rep(1:3, c(70, 50, 50))
  m <- cbind(stats::rnorm(170, c(0, 4, 8)[k]), stats::rnorm(170, c(0, -3, 2)[k]))
  g <- quiet(fit_mixture(list(m), family = "gaussian", components = 3, starts = 2, seed = 2,
                         backend = "cpu", bootstrap = 5, bootstrap_level = 0.9))
  py <- py_bulkem()$fit(list(bulkem:::py_hmm_array(m)), family = "gaussian", n_components = 3L,
                        n_starts = 2L, seed = 2L, backend = "cpu", bootstrap = 5L,
                        bootstrap_level = 0.9, progress = FALSE)
  expect_identical(g$intervals$parameter,
                   c("weight_1", "mean_1_1", "mean_1_2", "var_1_1", "var_1_2",
                     "weight_2", "mean_2_1", "mean_2_2", "var_2_1", "var_2_2",
                     "weight_3", "mean_3_1", "mean_3_2", "var_3_1", "var_3_2"))
  for (col in c("estimate", "lower", "upper")) {
    expect_equal(g$intervals[[col]], py_col(py$intervals, col), tolerance = 1e-12, info = col)
  }
  expect_equal(g$intervals$estimate, table_estimates(g), tolerance = 1e-12)
  expect_true(all(g$intervals$lower <= g$intervals$upper))
})

test_that("print, summary, `[`, as.data.frame and saveRDS keep the intervals table", {
  skip_if_no_bulkem()
  fit <- boot_fit()$fit
  expect_output(print(fit), paste0("Tables: $summary, $components, $starts, $start_values, ",
                                   "$intervals (95% bootstrap intervals, 5 refits)"),
                fixed = TRUE)
  s <- summary(fit)
  expect_identical(s$intervals, fit$intervals)
  expect_output(print(s), "95% bootstrap intervals \\([0-9] usable refits?\\):")
  expect_output(print(s), "lambda_2")
  expect_identical(as.data.frame(fit, table = "intervals"), fit$intervals)
  # some datasets: their rows, in the order asked
  two <- fit[2]
  expect_identical(two$intervals$dataset, rep(2L, 6L))
  expect_equal(two$intervals, fit$intervals[7:12, ], ignore_attr = TRUE)
  back <- fit[c(2, 1)]
  expect_identical(back$intervals$dataset, rep(c(2L, 1L), each = 6L))
  expect_identical(attr(two, "bootstrap"), attr(fit, "bootstrap"))
  expect_output(print(two), "$intervals (95% bootstrap intervals, 5 refits)", fixed = TRUE)
  # saved and read back (its Python object gone): the table and the methods
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  again <- readRDS(file)
  expect_true(reticulate::py_is_null_xptr(attr(again, "python")))
  expect_identical(again$intervals, fit$intervals)
  expect_identical(attr(again, "bootstrap"), attr(fit, "bootstrap"))
  expect_identical(again[1]$intervals, fit[1]$intervals)
  expect_identical(utils::capture.output(print(summary(again))),
                   utils::capture.output(print(summary(fit))))
  # a fit without a bootstrap has no such table, and print() does not name it
  plain <- quiet(fit_mixture(boot_fit()$data$r, components = 2, starts = 2, seed = 3,
                             backend = "cpu"))
  expect_false(any(grepl("$intervals", utils::capture.output(print(plain)), fixed = TRUE)))
  expect_false(any(grepl("bootstrap", utils::capture.output(print(summary(plain))))))
  expect_error(as.data.frame(plain, table = "intervals"), "`table` must be one of")
})

test_that("bootstrap arguments are checked, with messages in R's terms", {
  skip_if_no_bulkem()
  x <- boot_fit()$data$r
  msg <- "`bootstrap` must be one whole number >= 0 (the bootstrap refits per dataset, e.g. 200; 0 for none), got "
  expect_error(fit_mixture(x, bootstrap = -1), paste0(msg, "-1."), fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = 2.5), paste0(msg, "2.5."), fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = c(5, 10)), paste0(msg, "c(5, 10)."), fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = NA), paste0(msg, "NA."), fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = TRUE), paste0(msg, "TRUE."), fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = "5"), paste0(msg, "\"5\"."), fixed = TRUE)
  lmsg <- paste0("`bootstrap_level` must be one number between 0 and 1, both left out (the ",
                 "intervals' coverage, e.g. 0.95), got ")
  expect_error(fit_mixture(x, bootstrap = 5, bootstrap_level = 95), paste0(lmsg, "95."),
               fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = 5, bootstrap_level = 1), paste0(lmsg, "1."),
               fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = 5, bootstrap_level = 0), paste0(lmsg, "0."),
               fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap_level = NA_real_), paste0(lmsg, "NA_real_."),
               fixed = TRUE)
  expect_error(fit_mixture(x, bootstrap = 5, bootstrap_level = c(0.9, 0.95)),
               paste0(lmsg, "c(0.9, 0.95)."), fixed = TRUE)
  expect_error(fit_mixture(x, components = 1:3, bootstrap = 5), paste0(
    "`bootstrap` with a grid of sizes (components = 1:3): the bootstrap refits one size. ",
    "Choose the size with the grid fit, then bootstrap that size fitted alone: ",
    "fit_mixture(..., components = <the size chosen>, bootstrap = 5)."), fixed = TRUE)
  expect_error(fit_mixture(x, family = "hmm", bootstrap = 5),
               "fit_mixture() fits mixtures", fixed = TRUE)
})

test_that("mixture_sample() draws from a dataset's fitted mixture, as Python's sample()", {
  skip_if_no_bulkem()
  b <- boot_fit()
  fit <- b$fit
  draw <- mixture_sample(fit, 2, n = 7, seed = 1)
  expect_s3_class(draw, "data.frame")
  expect_named(draw, c("value", "component"))
  expect_identical(nrow(draw), 7L)
  expect_type(draw$component, "integer")
  expect_true(all(draw$component %in% 1:2))
  expect_true(all(draw$value > 0))
  out <- attr(fit, "python")$sample(1L, 7L, 1L) # dataset 2 is Python's 1
  expect_identical(draw$value, bulkem:::py_numbers(reticulate::py_get_item(out, 0L)))
  expect_identical(draw$component,
                   as.integer(bulkem:::py_numbers(reticulate::py_get_item(out, 1L))))
  # seed = NULL: from R's random numbers
  set.seed(9)
  first <- mixture_sample(fit, 1, n = 5)
  set.seed(9)
  expect_identical(mixture_sample(fit, 1, n = 5), first)
  # many values follow the fitted weights
  many <- mixture_sample(fit, 1, n = 20000, seed = 4)
  w <- fit$components$weight[fit$components$dataset == 1]
  expect_equal(as.vector(table(many$component)) / 20000, w, tolerance = 0.05)
  # a fit read back with readRDS(): the same draws, from the parameters it keeps
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  expect_identical(mixture_sample(readRDS(file), 2, n = 7, seed = 1), draw)
  # a subset and a grid fit draw from their datasets' fits
  expect_identical(mixture_sample(fit[2], n = 7, seed = 1), draw)
  grid <- quiet(fit_mixture(b$data$r, components = 1:2, starts = 2, seed = 3, backend = "cpu"))
  k <- grid$summary$n_components[1]
  expect_true(all(mixture_sample(grid, 1, n = 50, seed = 2)$component %in% seq_len(k)))
  expect_identical(mixture_sample(grid, 1, n = 9, seed = 2),
                   mixture_sample(fit_size(grid, k), 1, n = 9, seed = 2))
  # errors
  expect_error(mixture_sample(fit, n = 5), "This fit has 2 datasets; say which with `dataset = `",
               fixed = TRUE)
  expect_error(mixture_sample(fit, 3, n = 5), "dataset 3 has no fit: no such dataset.",
               fixed = TRUE)
  expect_error(mixture_sample(fit, 1, n = 0), "`n` must be >= 1 (how many values to draw), got 0.",
               fixed = TRUE)
  expect_error(mixture_sample(fit, 1, n = 1.5), "`n` must be one whole number, got 1.5.",
               fixed = TRUE)
  expect_error(mixture_sample(list(), 1), "`fit` must be the result of fit_mixture(), got a list.",
               fixed = TRUE)
})

test_that("mixture_sample() of a Gaussian mixture: a column per dimension", {
  skip_if_no_bulkem()
  set.seed(6)
  m <- cbind(stats::rnorm(120, rep(c(0, 5, 10), each = 40)), stats::rnorm(120))
  g <- quiet(fit_mixture(list(m), family = "gaussian", components = 3, starts = 2, seed = 2,
                         backend = "cpu")) # M = 3, D = 2: a size the Python tests compile
  draw <- mixture_sample(g, n = 6, seed = 3)
  expect_named(draw, c("value_1", "value_2", "component"))
  out <- attr(g, "python")$sample(0L, 6L, 3L)
  expect_identical(unname(as.matrix(draw[, 1:2])),
                   bulkem:::py_matrix(reticulate::py_get_item(out, 0L)))
})

# fit_hmm(), fit_tmap() and fit_ssm() with bootstrap = B: the intervals table
# against Python's bulkem.fit(bootstrap=B) on the same data and seed, the
# methods that walk a fit's tables, and the arguments' checks. Tiny fits of the
# sizes the other tests compile (2 states and 3 symbols; orders 1, 2, 3; AR(1)
# and a local level), 2 starts, 3 refits.

# A fit's intervals table against Python's: the same rows and numbers, ids
# as the R fit gives them (`ids`: the R ids of Python's in order).
expect_python_intervals <- function(iv, py_iv, key, ids) {
  expect_named(iv, c(key, "parameter", "estimate", "lower", "upper", "n_boot"))
  expect_identical(nrow(iv), reticulate::py_len(py_iv))
  expect_identical(iv[[key]], ids)
  expect_identical(iv$parameter, py_col(py_iv, "parameter"))
  for (col in c("estimate", "lower", "upper")) {
    expect_equal(iv[[col]], py_col(py_iv, col), tolerance = 1e-12, info = col)
  }
  expect_type(iv$n_boot, "integer")
  expect_identical(iv$n_boot, as.integer(py_col(py_iv, "n_boot")))
  expect_true(all(iv$n_boot >= 1L & iv$n_boot <= 3L))
  expect_true(all(is.finite(iv$lower) & is.finite(iv$upper)))
  expect_true(all(iv$lower <= iv$upper))
}

# 2 datasets of 2 categorical sequences of 40 symbols 0..2 (R's random numbers),
# and the same values as Python's list of lists of arrays.
hmm_boot_data <- function() {
  set.seed(21)
  chain <- function(n) {
    s <- cumsum(stats::runif(n) < 0.1) %% 2
    as.double(ifelse(s == 0, sample(0:1, n, TRUE), sample(1:2, n, TRUE)))
  }
  r <- list(list(chain(40), chain(40)), list(chain(40), chain(40)))
  py <- reticulate::r_to_py(lapply(r, function(d) lapply(d, bulkem:::py_float_array)))
  list(r = r, py = py)
}

test_that("fit_hmm(bootstrap = B): Python's intervals table, kept by the fit's methods", {
  skip_if_no_bulkem()
  data <- hmm_boot_data()
  fit <- quiet(fit_hmm(data$r, 2, symbols = 3, starts = 2, max_iter = 10, seed = 5,
                       backend = "cpu", bootstrap = 3))
  py <- py_bulkem()$fit(data$py, family = "hmm", emission = "categorical", n_symbols = 3L,
                        n_components = 2L, n_starts = 2L, max_iter = 10L, seed = 5L,
                        backend = "cpu", bootstrap = 3L, progress = FALSE)
  expect_named(fit, c("summary", "components", "transitions", "starts", "start_values",
                      "intervals"))
  iv <- fit$intervals
  # 2 start probabilities, 4 transitions, 2 x 3 emission probabilities per dataset
  expect_python_intervals(iv, py$intervals$astype(reticulate::dict(dataset = "int64")),
                          "dataset", rep(1:2, each = 12L))
  expect_identical(iv$parameter[1:12], c("startprob_1", "startprob_2", "transmat_1_1",
                                         "transmat_1_2", "transmat_2_1", "transmat_2_2",
                                         "prob_1_0", "prob_1_1", "prob_1_2", "prob_2_0",
                                         "prob_2_1", "prob_2_2"))
  # the estimates are the fitted parameters of the tables
  tr <- fit$transitions[fit$transitions$dataset == 2, ]
  expect_equal(iv$estimate[iv$dataset == 2 & startsWith(iv$parameter, "transmat_")],
               tr$prob[order(tr$from_state, tr$to_state)], tolerance = 1e-12)
  comp <- fit$components[fit$components$dataset == 1, ]
  expect_equal(iv$estimate[iv$dataset == 1 & startsWith(iv$parameter, "prob_")],
               as.vector(t(as.matrix(comp[, c("prob_0", "prob_1", "prob_2")]))),
               tolerance = 1e-12)
  expect_identical(attr(fit, "bootstrap"), list(refits = 3L, level = 0.95))
  expect_output(print(fit), paste0("Tables: $summary, $components, $transitions, $starts, ",
                                   "$start_values, $intervals (95% bootstrap intervals, ",
                                   "3 refits)"), fixed = TRUE)
  expect_identical(as.data.frame(fit, table = "intervals"), iv)
  two <- fit[2]
  expect_equal(two$intervals, iv[13:24, ], ignore_attr = TRUE)
  expect_identical(attr(two, "bootstrap"), attr(fit, "bootstrap"))
  expect_identical(fit[c(2, 1)]$intervals$dataset, rep(2:1, each = 12L))
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  again <- readRDS(file)
  expect_identical(again$intervals, iv)
  expect_identical(again[1]$intervals, fit[1]$intervals)
  # factor sequences: the same fit, the symbols named by their levels
  lv <- c("x", "y", "z")
  coded <- lapply(data$r, function(d) lapply(d, function(s) factor(lv[s + 1], levels = lv)))
  byfactor <- quiet(fit_hmm(coded, 2, starts = 2, max_iter = 10, seed = 5, backend = "cpu",
                            bootstrap = 3))
  named <- iv$parameter
  for (k in 0:2) named <- sub(paste0("^(prob_[0-9]+)_", k, "$"), paste0("\\1_", lv[k + 1]), named)
  expect_identical(byfactor$intervals$parameter, named)
  expect_equal(byfactor$intervals[, -2], iv[, -2], tolerance = 1e-12)
  # without a bootstrap: no table, and print() does not name it
  plain <- quiet(fit_hmm(data$r, 2, symbols = 3, starts = 2, max_iter = 10, seed = 5,
                         backend = "cpu"))
  expect_null(plain$intervals)
  expect_null(attr(plain, "bootstrap"))
  expect_equal(unclass(fit)[names(plain)], unclass(plain)[names(plain)])
  # the arguments, checked in R
  expect_error(fit_hmm(data$r, 2, symbols = 3, bootstrap = -1),
               "`bootstrap` must be one whole number >= 0", fixed = TRUE)
  expect_error(fit_hmm(data$r, 2, symbols = 3, bootstrap = 3, bootstrap_level = 1),
               "`bootstrap_level` must be one number between 0 and 1", fixed = TRUE)
  expect_error(fit_hmm(data$r, 2:3, symbols = 3, bootstrap = 3), paste0(
    "`bootstrap` with a grid of sizes (components = 2:3): the bootstrap refits one size. ",
    "Choose the size with the grid fit, then bootstrap that size fitted alone: ",
    "fit_hmm(..., components = <the size chosen>, bootstrap = 3)."), fixed = TRUE)
})

test_that("fit_tmap(bootstrap = B): Python's intervals table, one row per (trace, parameter)", {
  skip_if_no_bulkem()
  py_traces <- lapply(1:2, function(i) {
    py_bulkem()$datasets$simulate_tmap(30L, seed = as.integer(1L + i), as_frame = FALSE)
  })
  runs <- lapply(py_traces, function(trace) {
    lapply(seq_len(reticulate::py_len(trace)) - 1L, function(k) {
      as.double(unlist(reticulate::py_to_r(reticulate::py_get_item(trace, k)$tolist())))
    })
  })
  fit <- quiet(fit_tmap(runs, orders = c(1, 2, 3), starts = 2, max_iter = 15, seed = 3,
                        backend = "cpu", bootstrap = 3, bootstrap_level = 0.9))
  py <- py_bulkem()$fit(reticulate::r_to_py(py_traces), family = "tmap",
                        orders = reticulate::tuple(1L, 2L, 3L), n_starts = 2L, max_iter = 15L,
                        seed = 3L, backend = "cpu", bootstrap = 3L, bootstrap_level = 0.9,
                        progress = FALSE)
  expect_named(fit, c("summary", "components", "transitions", "starts", "start_values",
                      "intervals"))
  iv <- fit$intervals
  # 3 start probabilities, 3 x 3 transitions, 3 rates per trace
  expect_python_intervals(iv, py$intervals$astype(reticulate::dict(trace = "int64")),
                          "trace", rep(1:2, each = 15L))
  expect_setequal(iv$parameter, c(sprintf("alpha_%d", 1:3), sprintf("rate_%d", 1:3),
                                  sprintf("pi_%d_%d", rep(1:3, each = 3), 1:3)))
  # the estimates are the fitted parameters of the tables
  one <- iv[iv$trace == 2, ]
  est <- stats::setNames(one$estimate, one$parameter)
  p <- tmap_params(fit, 2)
  expect_equal(unname(est[sprintf("alpha_%d", 1:3)]), p$alpha, tolerance = 1e-12)
  expect_equal(unname(est[sprintf("rate_%d", 1:3)]), p$rates, tolerance = 1e-12)
  expect_equal(unname(est[sprintf("pi_%d_%d", rep(1:3, each = 3), 1:3)]), as.vector(t(p$pi)),
               tolerance = 1e-12)
  expect_identical(attr(fit, "bootstrap"), list(refits = 3L, level = 0.9))
  expect_output(print(fit), "$start_values, $intervals (90% bootstrap intervals, 3 refits)",
                fixed = TRUE)
  expect_identical(as.data.frame(fit, table = "intervals"), iv)
  expect_equal(fit[2]$intervals, one, ignore_attr = TRUE)
  expect_identical(fit[2]$intervals$trace, rep(2L, 15L))
  expect_error(fit_tmap(runs, bootstrap = 1.5), "`bootstrap` must be one whole number >= 0",
               fixed = TRUE)
  expect_error(fit_tmap(runs, orders = list(c(1, 2), c(1, 2, 3)), bootstrap = 3), paste0(
    "`bootstrap` with a grid of sizes (orders = list(c(1, 2), c(1, 2, 3))): the bootstrap ",
    "refits one size. Choose the size with the grid fit, then bootstrap that size fitted ",
    "alone: fit_tmap(..., orders = <the size chosen>, bootstrap = 3)."), fixed = TRUE)
})

test_that("fit_ssm(bootstrap = B): Python's intervals table for AR and local-level fits", {
  skip_if_no_bulkem()
  set.seed(13)
  data <- list(a = list(ar1_noise(80), ar1_noise(80)), b = ar1_noise(80))
  fit <- quiet(fit_ssm(data, "ar", order = 1, starts = 2, max_iter = 10, seed = 4,
                       backend = "cpu", bootstrap = 3))
  pydata <- reticulate::py_dict(c("a", "b"), list(
    reticulate::r_to_py(lapply(data$a, bulkem:::py_float_array)),
    reticulate::r_to_py(list(bulkem:::py_float_array(data$b)))))
  py <- py_bulkem()$fit(pydata, family = "ar", order = 1L, n_starts = 2L, max_iter = 10L,
                        seed = 4L, backend = "cpu", bootstrap = 3L, progress = FALSE)
  expect_named(fit, c("summary", "components", "starts", "start_values", "intervals"))
  iv <- fit$intervals
  expect_python_intervals(iv, py$intervals, "dataset", rep(c("a", "b"), each = 3L))
  expect_identical(iv$parameter, rep(c("phi_1", "state_var", "obs_var"), 2L))
  comp <- fit$components
  expect_equal(iv$estimate, comp$value[match(paste(iv$dataset, iv$parameter),
                                             paste(comp$dataset, comp$parameter))],
               tolerance = 1e-12)
  expect_identical(attr(fit, "bootstrap"), list(refits = 3L, level = 0.95))
  expect_output(print(fit), "$intervals (95% bootstrap intervals, 3 refits)", fixed = TRUE)
  expect_identical(as.data.frame(fit, table = "intervals"), iv)
  expect_identical(fit["b"]$intervals$dataset, rep("b", 3L))
  expect_equal(fit["b"]$intervals, iv[4:6, ], ignore_attr = TRUE)
  # a local level: its own parameters
  ll <- quiet(fit_ssm(list(cumsum(stats::rnorm(80)) + stats::rnorm(80)), "local_level",
                      starts = 2, max_iter = 10, seed = 1, backend = "cpu", bootstrap = 3))
  expect_identical(ll$intervals$parameter, c("level0", "state_var", "obs_var"))
  expect_identical(ll$intervals$dataset, rep(1L, 3L))
  expect_true(all(ll$intervals$lower <= ll$intervals$upper))
  expect_equal(ll$intervals$estimate, ll$components$value, tolerance = 1e-12)
  expect_error(fit_ssm(data, bootstrap = "3"), "`bootstrap` must be one whole number >= 0",
               fixed = TRUE)
  expect_error(fit_ssm(data, "ar", order = 1:2, bootstrap = 3), paste0(
    "`bootstrap` with a grid of sizes (order = 1:2): the bootstrap refits one size. ",
    "Choose the size with the grid fit, then bootstrap that size fitted alone: ",
    "fit_ssm(..., order = <the size chosen>, bootstrap = 3)."), fixed = TRUE)
})
