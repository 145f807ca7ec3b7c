# Fits saved with saveRDS() and read back in a new R session, where their
# Python objects are gone: every exported method and helper of every fit class
# gives what it gave on the fit as made. Those computed from the R tables (and
# the values a fit keeps) need no Python at all; the others (decoding, scoring,
# sampling, moments, smoothing) make the Python result again from the
# parameters the fit keeps.

# Small fits of every class, of the shapes the Python tests compile.
saved_fits <- function() {
  set.seed(31)
  data <- demo_data(2L, 200L, 33L)$r
  quiet <- function(code) suppressWarnings(code)
  counts <- function(n) stats::rpois(n, ifelse(cumsum(stats::runif(n) < 0.1) %% 2 == 0, 1, 6))
  ar2 <- function(n) as.numeric(stats::filter(stats::rnorm(n), c(0.5, 0.2), "recursive")) +
    stats::rnorm(n, sd = 0.3)
  runs <- function(n) lapply(seq_len(n), function(i) stats::rexp(1 + i %% 4))
  series_b <- list(ar2(60), ar2(50))
  series_b[[1]][7] <- NA # a missing step
  list(
    mix = quiet(fit_mixture(list(a = data[[1]], b = data[[2]], bad = c(1, NA)), starts = 2,
                            seed = 3, backend = "cpu")),
    gauss = quiet(fit_mixture(list(g = c(stats::rnorm(150), stats::rnorm(100, 4))),
                              family = "gaussian", starts = 2, seed = 3, backend = "cpu")),
    hmm = quiet(fit_hmm(list(a = list(counts(40), counts(30)), b = counts(50)), 2,
                        emission = "poisson", starts = 2, max_iter = 30, seed = 3,
                        backend = "cpu")),
    ar = quiet(fit_ssm(list(a = ar2(80), b = series_b), "ar", order = 2, starts = 2,
                       max_iter = 30, seed = 3, backend = "cpu")),
    level = quiet(fit_ssm(cumsum(stats::rnorm(70)) + stats::rnorm(70, sd = 0.5),
                          "local_level", starts = 2, max_iter = 30, seed = 3,
                          backend = "cpu")),
    tmap = quiet(fit_tmap(list(t1 = runs(15), t2 = runs(12)), orders = c(1, 2, 3), starts = 2,
                          max_iter = 10, seed = 3, backend = "cpu"))
  )
}

# Every exported method and helper on the fits `f` (from saved_fits()), as a
# list of results; plots go to PNG files in `png_dir`. Run in this session on
# the fits as made and in a new session on the fits read back. With
# python = FALSE, only those that need no Python.
saved_results <- function(f, png_dir, python = TRUE) {
  out <- list()
  try_msg <- function(code) tryCatch(code, error = function(e) paste("ERROR:", conditionMessage(e)))
  tables <- function(fit) lapply(unclass(fit), function(t) t)
  x <- c(0.3, 1, 2.5, 6)
  for (name in names(f)) {
    fit <- f[[name]]
    out[[paste0(name, "_print")]] <- utils::capture.output(print(fit))
    out[[paste0(name, "_logLik")]] <- logLik(fit)
    out[[paste0(name, "_AIC_BIC")]] <- c(AIC(fit), BIC(fit))
    out[[paste0(name, "_nobs")]] <- nobs(fit)
    out[[paste0(name, "_df")]] <- as.data.frame(fit, table = "components")
    out[[paste0(name, "_sub")]] <- tables(fit[1])
    if (!inherits(fit, "bulkem_hmm")) out[[paste0(name, "_coef")]] <- coef(fit)
  }
  # mixtures: all in R, from the tables and the values the fit keeps
  mix <- f$mix
  out$mix_summary <- utils::capture.output(print(summary(mix)))
  out$mix_predict <- predict(mix, x, dataset = "b")
  out$mix_density <- mixture_density(mix, "a", x)
  out$mix_fitted <- fitted(mix)
  out$mix_fitted_prob <- fitted(mix, "a", type = "prob")
  out$mix_residuals <- try_msg(residuals(mix))
  out$gauss_predict <- predict(f$gauss, c(-1, 2, 5))
  out$gauss_fitted <- fitted(f$gauss, type = "prob")
  out$gauss_density <- mixture_density(f$gauss, "g", c(-1, 2, 5))
  grDevices::png(file.path(png_dir, "mix.png"))
  plot(mix, "b")
  plot(f$gauss)
  grDevices::dev.off()
  # parameters from the tables
  out$hmm_params <- hmm_params(f$hmm, "a")
  out$tmap_params <- tmap_params(f$tmap, "t2")
  if (!isTRUE(python)) {
    out$hmm_decode <- try_msg(hmm_decode(f$hmm, "a", c(0, 1, 7, 5)))
    return(out)
  }
  # hidden Markov models: Python, from the parameters the fit keeps
  h <- f$hmm
  seqs <- list(c(0, 1, 7, 5, 6, 0), c(2, 2, 8))
  out$hmm_decode <- hmm_decode(h, "a", seqs)
  out$hmm_decode_one <- hmm_decode(h, "b", seqs[[1]])
  out$hmm_posterior <- hmm_posterior(h, "b", seqs)
  out$hmm_score <- hmm_score(h, "a", seqs)
  out$hmm_sample <- hmm_sample(h, "b", n_sequences = 2, length = 5, seed = 1)
  grDevices::png(file.path(png_dir, "hmm.png"))
  plot(h, "a", sequence = 2)
  grDevices::dev.off()
  # state-space models
  out$ar_smooth <- ssm_smooth(f$ar, "b", 1) # a series of the dataset (the values kept)
  out$ar_smooth_new <- ssm_smooth(f$ar, "a", c(0.2, NA, -0.4, 1))
  out$ar_score <- ssm_score(f$ar, "b", list(c(0.1, 0.3, -0.2), c(1, 0.5)))
  out$ar_fitted <- fitted(f$ar)
  out$ar_residuals <- residuals(f$ar, "b")
  out$level_fitted <- fitted(f$level)
  out$level_smooth <- ssm_smooth(f$level, 1)
  # TMAPs
  out$tmap_moments <- tmap_moments(f$tmap)
  out$tmap_sample <- tmap_sample(f$tmap, "t1", n_runs = 3, seed = 2)
  out$tmap_score <- tmap_score(f$tmap, "t2", list(c(0.5, 1.2), 0.3))
  out
}

test_that("every method of every fit class works on fits read back in a new R session", {
  skip_if_no_bulkem()
  fits <- saved_fits()
  dir <- tempfile("saved")
  dir.create(file.path(dir, "live"), recursive = TRUE)
  dir.create(file.path(dir, "back"))
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  live <- saved_results(fits, file.path(dir, "live"))
  # the values a fit keeps are the values Python fitted
  plotting <- reticulate::import("bulkem.result.plotting", convert = FALSE)
  expect_identical(bulkem:::fit_values(fits$mix, "b", "test"),
                   bulkem:::py_numbers(plotting$dataset_values(attr(fits$mix, "python"), "b")))
  # hmm_params() from the tables is Python's params()
  py <- attr(fits$hmm, "python")$params("a")
  expect_identical(live$hmm_params$transmat, bulkem:::py_matrix(py["transmat"]))
  expect_identical(live$hmm_params$lambdas, bulkem:::py_numbers(py["lambdas"]))
  expect_identical(live$hmm_params$startprob, bulkem:::py_numbers(py["startprob"]))

  saveRDS(fits, file.path(dir, "fits.rds"))
  code <- c(
    "library(bulkem)",
    paste("saved_results <-", paste(deparse(saved_results), collapse = "\n")),
    sprintf("fits <- readRDS('%s')", file.path(dir, "fits.rds")),
    "gone <- vapply(fits, function(f) reticulate::py_is_null_xptr(attr(f, 'python')), TRUE)",
    sprintf("out <- saved_results(fits, '%s')", file.path(dir, "back")),
    "out$gone <- gone",
    sprintf("saveRDS(out, '%s')", file.path(dir, "back.rds")),
    "cat('SAVED RESULTS OK\\n')"
  )
  out <- run_new_session(code)
  expect_true(any(out == "SAVED RESULTS OK"), info = paste(out, collapse = "\n"))
  back <- readRDS(file.path(dir, "back.rds"))
  expect_true(all(back$gone))
  back$gone <- NULL
  expect_setequal(names(back), names(live))
  for (name in names(live)) {
    expect_identical(back[[name]], live[[name]], info = name)
  }
  for (png in c("mix.png", "hmm.png")) {
    expect_true(file.size(file.path(dir, "back", png)) > 2000, info = png)
  }
  # (the live fits' own checks)
  expect_match(live$mix_residuals, "residuals() has no meaning for a mixture", fixed = TRUE)
  expect_identical(names(live$mix_fitted), c("a", "b", "bad"))
  expect_null(live$mix_fitted$bad)
  expect_identical(live$ar_smooth$y, c(attr(fits$ar, "saved")$values$x[81:140]))
})

test_that("without a Python side, a saved fit's R methods work and the others say why", {
  skip_if_no_bulkem()
  fits <- saved_fits()
  dir <- tempfile("saved")
  dir.create(file.path(dir, "live"), recursive = TRUE)
  dir.create(file.path(dir, "back"))
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  live <- saved_results(fits, file.path(dir, "live"), python = FALSE)
  saveRDS(fits, file.path(dir, "fits.rds"))
  out <- run_new_session(c(
    "library(bulkem)",
    paste("saved_results <-", paste(deparse(saved_results), collapse = "\n")),
    sprintf("fits <- readRDS('%s')", file.path(dir, "fits.rds")),
    sprintf("out <- saved_results(fits, '%s', python = FALSE)", file.path(dir, "back")),
    "out$available <- isTRUE(bulkem_available())",
    sprintf("saveRDS(out, '%s')", file.path(dir, "back.rds")),
    "cat('SAVED RESULTS OK\\n')"
  ), env = c(paste0("RETICULATE_PYTHON=", file.path(dir, "no-such-python")),
             "BULKEM_REQUIRE_PYTHON=", "PYTHONPATH="))
  expect_true(any(out == "SAVED RESULTS OK"), info = paste(out, collapse = "\n"))
  back <- readRDS(file.path(dir, "back.rds"))
  expect_false(back$available)
  expect_match(back$hmm_decode, "^ERROR: Python could not be started: .*RETICULATE_PYTHON")
  for (name in setdiff(names(live), "hmm_decode")) {
    expect_identical(back[[name]], live[[name]], info = name)
  }
})

test_that("a saved fit that kept no values, or no parameters, says what to do", {
  skip_if_no_bulkem()
  data <- demo_data(2L, 200L, 34L)$r
  old <- options(bulkem.keep_values = 300) # the fit's 400 values are more
  on.exit(options(old), add = TRUE)
  fit <- suppressWarnings(fit_mixture(data, starts = 2, seed = 1, backend = "cpu"))
  expect_null(attr(fit, "saved")$values)
  expect_length(fitted(fit, 1), 200L) # from the Python object while it is there
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  back <- readRDS(file)
  expect_error(fitted(back, 1), paste0(
    "fitted() needs the dataset's values: the fit keeps no values (it held more than ",
    "getOption(\"bulkem.keep_values\", 1e6) of them) and its Python object is gone (saved ",
    "and read back). Pass them to predict(fit, values, dataset = ...) instead."), fixed = TRUE)
  expect_error(plot(back, 2), "plot() needs the dataset's values", fixed = TRUE)
  expect_identical(predict(back, data[[1]], dataset = 1)$classification, fitted(fit, 1))
  options(bulkem.keep_values = -1)
  expect_error(fit_mixture(data, starts = 2, seed = 1, backend = "cpu"),
               "option bulkem.keep_values must be one number >= 0", fixed = TRUE)
  options(old)
  # a fit saved by an older version of the package kept no parameters
  h <- suppressWarnings(fit_hmm(list(c(0, 1, 1, 0, 2, 2, 1)), 2, emission = "poisson",
                                starts = 2, max_iter = 5, seed = 1, backend = "cpu"))
  saveRDS(h, file)
  old_fit <- readRDS(file)
  attr(old_fit, "saved") <- NULL
  expect_error(hmm_decode(old_fit, 1, c(0, 1)), paste0(
    "This needs the fit's Python object, which is gone (the fit was saved and read back, ",
    "or made in another R session), and the fit keeps no parameters to make it again (it ",
    "was made by an older version of the bulkem R package): fit again."), fixed = TRUE)
  expect_identical(hmm_params(old_fit, 1), hmm_params(h, 1))
})
