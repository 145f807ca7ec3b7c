# Linear-Gaussian state-space models: fit_ssm() (AR(p) plus noise, or a local
# level: bulkem.fit(family = "ar" | "local_level") in Python), the smoothed
# signal and the log-likelihood of series under a fit.

fit_ssm <- function(data, model = "ar", order = 1, starts = 10, max_iter = 500, tol = 1e-6,
                    seed = NULL, backend = "auto", dtype = "float64", strict = FALSE,
                    progress = FALSE, dataset_col = "dataset", series_col = "series",
                    value_col = "value", checkpoint = NULL, se = FALSE, criterion = "bic",
                    bootstrap = 0, bootstrap_level = 0.95, accel = NULL,
                    prior = c("fitted", "diffuse"), weights = NULL) {
  one_string(model, "model")
  if (!model %in% c("ar", "local_level")) {
    stop("`model` must be \"ar\" (an AR(p) process plus noise) or \"local_level\" (a random ",
      "walk plus noise), got \"", model, "\".",
      call. = FALSE
    )
  }
  one_string(dataset_col, "dataset_col")
  one_string(series_col, "series_col")
  one_string(value_col, "value_col")
  one_number(tol, "tol")
  check_se(se)
  check_criterion(criterion)
  n_boot <- check_bootstrap(bootstrap, bootstrap_level)
  check_accel(accel)
  prior <- check_prior(prior, model)
  ar <- identical(model, "ar")
  if (ar) {
    py_order <- py_sizes(order, "order")
    if (length(order) > 1L) {
      check_grid_args(order, "order", checkpoint = checkpoint, bootstrap = n_boot,
                      maker = "fit_ssm")
    }
  }
  cp <- checkpoint_start(checkpoint)
  module <- bulkem_module()
  batch <- py_hmm_batch(data, FALSE, dataset_col, series_col, value_col)
  terms <- list(ids = batch$ids, interface = "fit_ssm")
  args <- list(
    module$fit, batch$py,
    family = model,
    n_starts = py_int(starts, "starts"),
    max_iter = py_int(max_iter, "max_iter"),
    tol = as.double(tol),
    seed = checkpoint_seed(seed, cp),
    backend = backend,
    dtype = dtype,
    strict = isTRUE(strict),
    progress = isTRUE(progress),
    dataset_col = dataset_col,
    value_col = value_col,
    series_col = series_col,
    checkpoint = cp$path,
    se = se,
    criterion = criterion,
    bootstrap = n_boot,
    bootstrap_level = as.double(bootstrap_level),
    accel = accel,
    .terms = terms
  )
  if (ar) {
    args$order <- py_order
  }
  if (identical(prior, "diffuse")) {
    # (only then: a call with the default prior is the call without it, so that a
    # checkpoint written before prior existed still resumes)
    args$prior <- prior
  }
  if (!is.null(weights)) { # (only when given, as prior: one weight per series)
    args$weights <- py_weights(weights)
  }
  py <- do.call(py_call, args)
  how <- list(ids = batch$ids, lengths = batch$lengths, labels = batch$labels, model = model,
              order = if (ar) as.integer(order) else NA_integer_, prior = prior, se = se,
              criterion = criterion, bootstrap = bootstrap, bootstrap_level = bootstrap_level)
  fit <- ssm_fit(py, how, checkpoint = checkpoint_done(cp))
  warn_not_converged(fit$summary$status, max_iter, tol)
  fit
}

# The R fit of a Python result of bulkem.fit(family = "ar" | "local_level"),
# of one size or a grid of AR orders (see selection.R): fit_ssm(), and
# fit_size() of a grid fit. how: what fit_ssm() knew besides the result
# (dataset ids, series lengths and labels, the model, the order: one, or a
# vector for a grid; the local level's prior, se, criterion, bootstrap,
# bootstrap_level).
ssm_fit <- function(py, how, checkpoint = NULL) {
  grid <- py_grid(py, how)
  ar <- identical(how$model, "ar")
  order <- if (is.null(grid)) how$order else grid$sizes
  structure(
    r_tables(py, how$ids, grid = grid),
    class = "bulkem_ssm",
    backend = reticulate::py_to_r(py$backend),
    seed = as.numeric(reticulate::py_str(py$seed)),
    family = how$model,
    order = order,
    elapsed = reticulate::py_to_r(py$elapsed),
    ids = how$ids,
    sequence_lengths = how$lengths,
    sequence_labels = how$labels,
    checkpoint = checkpoint,
    saved = saved_state(py, ssm_options(how$model, order, how$prior)),
    vcov = saved_vcov(py, how$ids, how$se),
    grid = grid,
    bootstrap = bootstrap_attr(py, how),
    python = py
  )
}

# prior: the local level's prior of the first level, "fitted" (N(level0,
# state_var), level0 a parameter) or "diffuse" (flat, no level0), checked
# against the model (AR's prior is its stationary law: nothing to choose).
check_prior <- function(prior, model) {
  if (identical(prior, c("fitted", "diffuse"))) {
    prior <- "fitted" # (the default)
  }
  if (!is.character(prior) || length(prior) != 1L || is.na(prior) ||
    !prior %in% c("fitted", "diffuse")) {
    stop("`prior` must be \"fitted\" (the first level N(level0, state_var), level0 fitted) or ",
      "\"diffuse\" (a flat prior, no level0), got ", paste(deparse(prior), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (identical(prior, "diffuse") && !identical(model, "local_level")) {
    stop("prior = \"diffuse\" is for model = \"local_level\" (a random walk, which has no ",
      "stationary law); the AR model's prior is its stationary law. Leave `prior` out.",
      call. = FALSE
    )
  }
  prior
}

# The options that make a fit's Python model again (saved.R): the AR order, or
# the local level's prior when it is not the default (a fit saved before prior
# existed has none: "fitted").
ssm_options <- function(model, order, prior) {
  if (identical(model, "ar")) {
    list(order = order)
  } else if (identical(prior, "diffuse")) {
    list(prior = prior)
  } else {
    list()
  }
}

print.bulkem_ssm <- function(x, ...) {
  s <- x$summary
  counts <- table(s$status)
  grid <- attr(x, "grid")
  what <- if (!is.null(grid)) {
    paste0("AR(p) plus noise, ", grid_heading(grid, "p ="))
  } else if (identical(attr(x, "family"), "ar")) {
    sprintf("AR(%d) plus noise", attr(x, "order"))
  } else {
    "local level (random walk plus noise)"
  }
  cat(sprintf("bulkem fit: %s, %d dataset%s, backend %s, seed %.0f, %.3g s\n", what, nrow(s),
    if (nrow(s) == 1L) "" else "s", attr(x, "backend"), attr(x, "seed"), attr(x, "elapsed")))
  print_grid(x)
  cat("status:", paste(names(counts), counts, sep = " ", collapse = ", "), "\n")
  cat("Tables: $summary, $components (one row per parameter), $starts, $start_values",
      if (!is.null(grid)) ", $selection (every size)",
      if (!is.null(x$intervals)) paste0(", $intervals (", bootstrap_text(x), ")"), "\n",
      sep = "")
  print(utils::head(s[, print_columns(x, c("dataset", "n_obs", "status", "loglik", "n_iter",
                                           "bic", "ar_radius"))], 10L))
  if (nrow(s) > 10L) {
    cat("... ", nrow(s) - 10L, " more datasets\n", sep = "")
  }
  invisible(x)
}

logLik.bulkem_ssm <- logLik.bulkem_fit

nobs.bulkem_ssm <- nobs.bulkem_fit

as.data.frame.bulkem_ssm <- as.data.frame.bulkem_fit

`[.bulkem_ssm` <- `[.bulkem_fit`

# The dataset's fitted parameters as a named vector (from the R table).
coef.bulkem_ssm <- function(object, ...) {
  comp <- object$components
  s <- object$summary
  params <- unique(comp$parameter)
  out <- matrix(NA_real_, nrow(s), length(params),
    dimnames = list(as.character(s$dataset), params)
  )
  out[cbind(match(as.character(comp$dataset), as.character(s$dataset)),
            match(comp$parameter, params))] <- comp$value
  out
}

ssm_smooth <- function(fit, dataset, series = 1) {
  py <- python_of(fit, "bulkem_ssm", "fit_ssm")
  if (is.numeric(series) && length(series) == 1L && !is.na(series) &&
    series == round(series) && series >= 1) {
    # a position, from 1: the series from the values the fit keeps (else from Python)
    series <- dataset_series(fit, fitted_dataset(fit, dataset), as.integer(series))
  }
  target <- py_float_array(check_sequence(series, "`series`", FALSE))
  out <- r_table(py_call(py$smooth, python_dataset_id(fit, dataset), target,
                         .terms = ssm_terms(fit)))
  out$step <- out$step + 1L
  out
}

# Series k (from 1) of a dataset, from the values the fit keeps.
dataset_series <- function(fit, id, k) {
  pos <- match(as.character(id), as.character(fit$summary$dataset))
  lengths <- attr(fit, "sequence_lengths")
  lengths <- if (is.null(lengths)) NULL else lengths[[pos]]
  values <- fit_values(fit, id, "ssm_smooth()")
  if (is.null(lengths)) {
    lengths <- length(values)
  }
  if (k > length(lengths)) {
    stop("dataset ", dataset_label(id), " has ", length(lengths), " series; got series = ", k,
      ".",
      call. = FALSE
    )
  }
  values[sum(lengths[seq_len(k - 1L)]) + seq_len(lengths[k])]
}

ssm_score <- function(fit, dataset, series) {
  py <- python_of(fit, "bulkem_ssm", "fit_ssm")
  seqs <- if (is.list(series)) series else list(series)
  arrays <- lapply(seq_along(seqs), function(k) {
    py_float_array(check_sequence(seqs[[k]], paste0("series ", k), FALSE))
  })
  reticulate::py_to_r(py_call(py$score, python_dataset_id(fit, dataset),
    reticulate::r_to_py(arrays), .terms = ssm_terms(fit)))
}

ssm_terms <- function(fit) list(ids = attr(fit, "ids"), interface = "fit_ssm")

# fitted(): the smoothed signal (ssm_smooth()'s mean) of a dataset's series,
# one after the other; residuals(): the observations minus it (NA where a
# step is missing).
fitted.bulkem_ssm <- function(object, dataset = NULL, ...) {
  ssm_signal(object, dataset, residual = FALSE)
}

residuals.bulkem_ssm <- function(object, dataset = NULL, ...) {
  ssm_signal(object, dataset, residual = TRUE)
}

ssm_signal <- function(fit, dataset, residual) {
  check_fit_class(fit, "bulkem_ssm", "fit_ssm")
  lengths <- attr(fit, "sequence_lengths")
  per_dataset(fit, dataset, function(id) {
    pos <- match(as.character(id), as.character(fit$summary$dataset))
    n_series <- if (is.null(lengths)) 1L else length(lengths[[pos]])
    unlist(lapply(seq_len(n_series), function(k) {
      sm <- ssm_smooth(fit, id, k)
      if (residual) sm$y - sm$mean else sm$mean
    }))
  })
}
