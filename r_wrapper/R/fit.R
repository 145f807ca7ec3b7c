# The two fitting interfaces: fit_mixture() (tidy tables, as in Python) and
# bulkem() (the interface of the original bulkem R package).

# interface: "fit_mixture" or "bulkem", whose argument names the messages use.
run_fit <- function(datasets, family, components, starts, max_iter, tol, seed,
                     backend, dtype, init, strict, progress, interface = "fit_mixture",
                     dataset_col = "dataset", value_col = "value", reg_covar = 1e-6,
                     init_method = NULL, checkpoint = NULL, se = FALSE,
                     criterion = "bic", bootstrap = 0, bootstrap_level = 0.95,
                     accel = NULL, covariance_type = NULL, weights = NULL) {
  original <- identical(interface, "bulkem")
  name <- function(fit_mixture, bulkem) if (original) bulkem else fit_mixture
  check_mixture_family(family)
  covariance_type <- check_covariance_type(covariance_type, family)
  one_string(dataset_col, "dataset_col")
  if (!is.character(value_col) || length(value_col) < 1L || anyNA(value_col)) {
    stop("`value_col` must name one column (or, for family = \"gaussian\", several), got ",
      paste(deparse(value_col), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (length(value_col) > 1L && !identical(family, "gaussian")) {
    stop("`value_col` names ", length(value_col), " columns; only family = \"gaussian\" ",
      "fits several dimensions. Name one column, or pass family = \"gaussian\".",
      call. = FALSE
    )
  }
  one_number(reg_covar, "reg_covar")
  check_se(se)
  check_criterion(criterion)
  n_boot <- check_bootstrap(bootstrap, bootstrap_level)
  check_accel(accel)
  # bulkem(), the original interface, fits one size
  n_components <- if (original) {
    py_int(components, "num.components")
  } else {
    py_sizes(components, "components")
  }
  if (length(components) > 1L) {
    check_grid_args(components, "components", init, checkpoint, bootstrap = n_boot)
  }
  if (!is.null(init_method)) {
    one_string(init_method, "init_method")
  }
  cp <- checkpoint_start(checkpoint)
  module <- bulkem_module()
  data <- py_datasets(datasets, dataset_col, value_col,
                      matrices = identical(family, "gaussian"))
  if (!is.numeric(tol) || length(tol) != 1L || is.na(tol)) {
    stop("`", name("tol", "epsilon"), "` must be one number >= 0, got ",
      paste(deparse(tol), collapse = ""), ".",
      call. = FALSE
    )
  }
  # covariance_type only for the other types: a diagonal fit makes the call (and its
  # checkpoint records the arguments) of the versions before covariance_type
  options <- if (!is.null(covariance_type) && !identical(covariance_type, "diag")) {
    list(covariance_type = covariance_type)
  }
  # weights only when given, as covariance_type: a call without them is the call before them
  if (!is.null(weights)) {
    options <- c(options, list(weights = py_weights(weights)))
  }
  result <- do.call(py_call, c(list(
    module$fit,
    data$py,
    family = family,
    n_components = n_components,
    n_starts = py_int(starts, name("starts", "random.inits")),
    max_iter = py_int(max_iter, name("max_iter", "max.iters")),
    tol = as.double(tol),
    seed = checkpoint_seed(seed, cp),
    backend = backend,
    dtype = dtype,
    init = py_init(init, family, covariance_type),
    strict = isTRUE(strict),
    progress = isTRUE(progress),
    dataset_col = dataset_col,
    value_col = if (length(value_col) == 1L) value_col else as.list(value_col),
    reg_covar = as.double(reg_covar),
    init_method = init_method,
    checkpoint = cp$path,
    se = se,
    criterion = criterion,
    bootstrap = n_boot,
    bootstrap_level = as.double(bootstrap_level),
    accel = accel),
    options,
    list(.terms = list(ids = data$ids, interface = interface))
  ))
  list(py = result, ids = data$ids, checkpoint = checkpoint_done(cp))
}

# checkpoint = NULL or a folder -> list(path =, resumed =, before =): the
# folder as Python gets it, whether it holds a run already, and its finished
# chunks before this call (NULL for no checkpoint).
checkpoint_start <- function(checkpoint) {
  if (is.null(checkpoint)) {
    return(NULL)
  }
  if (!is.character(checkpoint) || length(checkpoint) != 1L || is.na(checkpoint) ||
    !nzchar(checkpoint)) {
    stop("`checkpoint` must be one folder path, e.g. checkpoint = \"fits.checkpoint\", got ",
      paste(deparse(checkpoint), collapse = ""), ".",
      call. = FALSE
    )
  }
  path <- normalizePath(path.expand(checkpoint), mustWork = FALSE)
  list(
    path = path,
    resumed = file.exists(file.path(path, "manifest.json")),
    before = checkpoint_chunks(path)
  )
}

# The finished chunks of a checkpoint folder (Python renames a chunk's folder
# to chunk-NNNNNN once it is complete).
checkpoint_chunks <- function(path) {
  if (!dir.exists(path)) {
    return(0L)
  }
  sum(dir.exists(file.path(path, list.files(path, pattern = "^chunk-[0-9]{6}$"))))
}

# The seed to pass: with seed = NULL a resumed checkpoint keeps its own (Python
# reads it from the folder), a new run draws one from R's random numbers.
checkpoint_seed <- function(seed, cp) {
  if (is.null(seed) && isTRUE(cp$resumed)) {
    return(NULL)
  }
  py_int(r_seed(seed), "seed")
}

# After a checkpointed fit: list(path =, chunks =, read =, fitted =), the
# chunks read back from the folder and those fitted by this call (the
# attribute "checkpoint" of the fit); a message when chunks were read back.
checkpoint_done <- function(cp) {
  if (is.null(cp)) {
    return(NULL)
  }
  total <- checkpoint_chunks(cp$path)
  read <- min(cp$before, total)
  if (read > 0L) {
    message(sprintf("Resumed the checkpoint %s: %d of %d chunk%s read back, %d fitted.",
      cp$path, read, total, if (total == 1L) "" else "s", total - read))
  }
  list(path = cp$path, chunks = total, read = read, fitted = total - read)
}

# The seed of the random starts: with NULL, one drawn from R's random numbers,
# so that set.seed() makes a fit reproducible (as in the original bulkem).
r_seed <- function(seed) {
  if (is.null(seed)) {
    return(sample.int(.Machine$integer.max, 1L) - 1L)
  }
  seed
}

# accel: NULL (the family's default: SQUAREM, on for every family), TRUE or FALSE,
# checked (the value passed to
# Python's fit(accel=...), NULL as None).
check_accel <- function(accel) {
  if (!is.null(accel) && (!is.logical(accel) || length(accel) != 1L || is.na(accel))) {
    stop("`accel` must be NULL (the family's default), TRUE (EM accelerated by SQUAREM) or ",
      "FALSE (plain EM), got ", paste(deparse(accel), collapse = ""), ".",
      call. = FALSE
    )
  }
  accel
}

# The Gaussian family's covariance types (fit_mixture(covariance_type = )): "diag"
# (a variance per dimension, the default), "full" (a covariance matrix per component),
# "tied" (one covariance matrix shared by the components) and "spherical" (one variance
# per component).
covariance_types <- c("diag", "full", "tied", "spherical")

# covariance_type of fit_mixture(), checked against the family: NULL (not given),
# "diag", "full", "tied" or "spherical" for the Gaussian family. Returns the type (NULL
# for the other families, "diag" for a Gaussian fit that did not say).
check_covariance_type <- function(covariance_type, family) {
  gaussian <- identical(family, "gaussian")
  if (is.null(covariance_type)) {
    return(if (gaussian) "diag")
  }
  if (!is.character(covariance_type) || length(covariance_type) != 1L ||
    is.na(covariance_type) || !covariance_type %in% covariance_types) {
    stop("`covariance_type` must be \"diag\" (a variance per dimension, the default), ",
      "\"full\" (a covariance matrix per component), \"tied\" (one covariance matrix ",
      "shared by the components) or \"spherical\" (one variance per component), got ",
      paste(deparse(covariance_type), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (!gaussian) {
    stop("`covariance_type` is an option of the Gaussian family (family = \"gaussian\"); ",
      "family = \"", family, "\" has no covariance matrix. Leave covariance_type out, or ",
      "pass family = \"gaussian\".",
      call. = FALSE
    )
  }
  covariance_type
}

# Python's name of a mixture fit's family -> list(family =, covariance_type =): the
# families of the Gaussian covariance types ("gaussian_full", "gaussian_tied",
# "gaussian_spherical", as FitResult.family names them) are family "gaussian" with their
# type, "gaussian" itself is "diag"; the other families have no covariance type (NULL).
split_family <- function(name) {
  if (is.character(name) && length(name) == 1L &&
    name %in% paste0("gaussian_", setdiff(covariance_types, "diag"))) {
    return(list(family = "gaussian", covariance_type = sub("^gaussian_", "", name)))
  }
  list(family = name, covariance_type = if (identical(name, "gaussian")) "diag")
}

# A mixture fit's family and covariance type (list(family =, covariance_type =)):
# the attributes "family" and "covariance_type" (a fit saved before covariance types
# has no "covariance_type": its Gaussian fits are "diag").
fit_family <- function(fit) {
  out <- split_family(attr(fit, "family"))
  type <- attr(fit, "covariance_type")
  if (identical(out$family, "gaussian") && !is.null(type)) {
    out$covariance_type <- type
  }
  out
}

# What print() adds to "gaussian mixture" for a covariance type other than "diag".
covariance_text <- function(covariance_type) {
  switch(if (is.null(covariance_type)) "" else covariance_type,
    full = " (full covariance matrices)",
    tied = " (a tied covariance matrix)",
    spherical = " (spherical covariances)",
    ""
  )
}

# The families fit_mixture() serves; the others are refused with the R
# function that fits them.
check_mixture_family <- function(family) {
  one_string(family, "family")
  if (!family %in% c("hmm", "tmap", "ar", "local_level")) {
    return(invisible(family)) # a mixture, or a name Python refuses with the list of families
  }
  where <- if (identical(family, "hmm")) {
    "Hidden Markov models are fitted by fit_hmm(data, components, emission = ...)."
  } else if (family %in% c("ar", "local_level")) {
    paste0("State-space models are fitted by fit_ssm(data, model = \"", family, "\").")
  } else {
    paste0("Transient Markovian arrival processes are fitted by fit_tmap(data, ",
      "orders = c(1, 2, 3)).")
  }
  stop("fit_mixture() fits mixtures: family must be \"invgauss\", \"gaussian\", ",
    "\"poisson\", \"negbinom\", \"lognormal\" or \"gamma\", got \"",
    family, "\". ", where,
    call. = FALSE
  )
}

# One warning per call for the fits whose best start stopped at max_iter
# before its log-likelihood settled (class "bulkem_not_converged").
warn_not_converged <- function(status, max_iter, tol, interface = "fit_mixture") {
  n <- sum(status == "max_iter", na.rm = TRUE)
  if (n == 0L) {
    return(invisible(0L))
  }
  fitted <- sum(status %in% c("converged", "max_iter"))
  original <- identical(interface, "bulkem")
  msg <- sprintf(
    paste0("%d of %d fit%s did not converge: %s stopped at %s = %s with the ",
           "log-likelihood still changing by more than %s = %g. Increase %s, or see %s."),
    n, fitted, if (fitted == 1L) "" else "s", if (n == 1L) "it" else "they",
    if (original) "max.iters" else "max_iter", format(max_iter),
    if (original) "epsilon" else "tol", tol,
    if (original) "max.iters" else "max_iter",
    if (original) "the fits whose fit_success is FALSE" else "fit$summary$status"
  )
  warning(warningCondition(msg, class = "bulkem_not_converged"))
  invisible(n)
}

# The FitResult tables as R data.frames, with R conventions: dataset
# positions and start numbers count from 1, and "no value" is NA (Python's
# -1 placeholders for best_start and n_iter of datasets without a fit).
# key: the column naming each row's dataset ("trace" for a TMAP). A grid fit
# (grid: its attribute, see selection.R) adds the table `selection`, and its
# summary's size column is R's (integers, or Erlang orders as text "1,2,3");
# a fit with bootstrap = B the table `intervals` (see bootstrap.R).
r_tables <- function(py, ids, key = "dataset", grid = NULL) {
  summary <- r_table(py$summary)
  components <- r_table(py$components)
  starts <- r_table(py$starts)
  start_values <- r_table(py$start_values)
  summary[[key]] <- r_ids(summary[[key]], ids)
  components[[key]] <- r_ids(components[[key]], ids)
  starts[[key]] <- r_ids(starts[[key]], ids)
  start_values[[key]] <- r_ids(start_values[[key]], ids)
  summary$best_start <- ifelse(summary$best_start < 0L, NA_integer_,
    as.integer(summary$best_start + 1L)
  )
  summary$n_iter[summary$n_iter < 0L] <- NA_integer_
  starts$start <- as.integer(starts$start + 1L)
  start_values$start <- as.integer(start_values$start + 1L)
  out <- list(
    summary = summary,
    components = components,
    starts = starts,
    start_values = start_values
  )
  if (!is.null(grid)) {
    label <- grid$label
    frame <- py$selection
    selection <- r_table(frame)
    selection[[key]] <- r_ids(selection[[key]], ids)
    selection[[label]] <- r_size_column(reticulate::py_get_item(frame, label), label)
    selection$n_iter[selection$n_iter < 0L] <- NA_integer_
    out$summary[[label]] <- r_size_column(reticulate::py_get_item(py$summary, label), label)
    out$selection <- selection
  }
  if (py_has_table(py, "intervals")) {
    out$intervals <- r_intervals(py, ids, key)
  }
  out
}

fit_mixture <- function(datasets, family = "invgauss", components = 2, starts = 10,
                        max_iter = 100, tol = 1e-6, seed = NULL, backend = "auto",
                        dtype = "float64", init = NULL, strict = FALSE,
                        progress = FALSE, dataset_col = "dataset", value_col = "value",
                        reg_covar = 1e-6, init_method = NULL, checkpoint = NULL,
                        se = FALSE, criterion = "bic", bootstrap = 0,
                        bootstrap_level = 0.95, accel = NULL,
                        covariance_type = c("diag", "full", "tied", "spherical"),
                        weights = NULL) {
  run <- run_fit(
    datasets, family, components, starts, max_iter, tol, seed, backend, dtype,
    init, strict, progress,
    dataset_col = dataset_col, value_col = value_col, reg_covar = reg_covar,
    init_method = init_method, checkpoint = checkpoint, se = se, criterion = criterion,
    bootstrap = bootstrap, bootstrap_level = bootstrap_level, accel = accel,
    covariance_type = if (!missing(covariance_type)) covariance_type,
    weights = weights
  )
  fit <- mixture_fit(run$py, list(ids = run$ids, se = se, criterion = criterion,
                                  bootstrap = bootstrap, bootstrap_level = bootstrap_level),
                     checkpoint = run$checkpoint)
  warn_not_converged(fit$summary$status, max_iter, tol)
  fit
}

# The R fit of a Python result of bulkem.fit for a mixture, of one size or a
# grid of sizes (see selection.R): fit_mixture(), and fit_size() of a grid fit.
# how: list(ids =, se =, criterion =, bootstrap =, bootstrap_level =), what the
# call knew besides the result.
mixture_fit <- function(py, how, checkpoint = NULL) {
  grid <- py_grid(py, how)
  # a Gaussian fit: family "gaussian" and its covariance type (Python's family objects
  # "gaussian_full", "gaussian_tied" and "gaussian_spherical")
  family <- split_family(reticulate::py_to_r(py$family))
  structure(
    r_tables(py, how$ids, grid = grid),
    class = "bulkem_fit",
    backend = reticulate::py_to_r(py$backend),
    seed = as.numeric(reticulate::py_str(py$seed)),
    family = family$family,
    covariance_type = family$covariance_type,
    n_components = if (is.null(grid)) reticulate::py_to_r(py$n_components) else grid$sizes,
    n_dims = as.integer(reticulate::py_to_r(py$n_dims)),
    elapsed = reticulate::py_to_r(py$elapsed),
    ids = how$ids,
    checkpoint = checkpoint,
    saved = saved_state(py),
    vcov = saved_vcov(py, how$ids, how$se),
    grid = grid,
    bootstrap = bootstrap_attr(py, how),
    python = py
  )
}

print.bulkem_fit <- function(x, ...) {
  s <- x$summary
  counts <- table(s$status)
  grid <- attr(x, "grid")
  size <- if (is.null(grid)) {
    sprintf("%d components", attr(x, "n_components"))
  } else {
    grid_heading(grid)
  }
  family <- fit_family(x)
  cat(sprintf(
    "bulkem fit: %s mixture%s, %s, %d dataset%s, backend %s, seed %.0f, %.3g s\n",
    family$family, covariance_text(family$covariance_type), size, nrow(s),
    if (nrow(s) == 1L) "" else "s", attr(x, "backend"), attr(x, "seed"), attr(x, "elapsed")
  ))
  print_grid(x)
  cat("status:", paste(names(counts), counts, sep = " ", collapse = ", "), "\n")
  cat("Tables: $summary, $components, $starts, $start_values",
      if (!is.null(grid)) ", $selection (every size)",
      if (!is.null(x$intervals)) paste0(", $intervals (", bootstrap_text(x), ")"), "\n",
      sep = "")
  print(utils::head(s[, print_columns(x, c("dataset", "n_obs", "status", "loglik", "n_iter",
                                           "bic"))], 10L))
  if (nrow(s) > 10L) {
    cat("... ", nrow(s) - 10L, " more datasets\n", sep = "")
  }
  invisible(x)
}

mixture_density <- function(fit, dataset, x) {
  if (!inherits(fit, "bulkem_fit")) {
    stop("`fit` must be the result of fit_mixture(), got a ", class(fit)[1L], ".",
      call. = FALSE
    )
  }
  # from the components table: a fit read back with readRDS() works too
  mixture_values(fit, one_dataset(fit, dataset), x)
}

# An R dataset id -> the Python one.
python_dataset_id <- function(fit, dataset) {
  if (length(dataset) != 1L) {
    stop("`dataset` must be one dataset id, as in fit$summary$dataset.", call. = FALSE)
  }
  id <- py_id(dataset, attr(fit, "ids"))
  if (is.numeric(id) && id == round(id)) {
    id <- as.integer(id)
  }
  id
}

# A numpy array -> an R numeric vector (flattened).
py_numbers <- function(a) {
  as.double(unlist(reticulate::py_to_r(a$ravel()$tolist())))
}

plot.bulkem_fit <- function(x, dataset = NULL, breaks = "FD", tail = 0.01,
                            main = NULL, xlab = "value", legend = TRUE, ...) {
  n_dims <- attr(x, "n_dims")
  if (!is.null(n_dims) && n_dims > 1L) {
    stop("plot() draws one-dimensional mixtures; this fit has ", n_dims, " dimensions. ",
      "Use mixture_density() or predict() with a matrix of points (a row each).",
      call. = FALSE
    )
  }
  s <- x$summary
  if (is.null(dataset)) {
    fitted <- s$dataset[s$status %in% c("converged", "max_iter")]
    if (length(fitted) == 0L) {
      stop("No dataset of this fit has fitted parameters (see fit$summary$status).",
        call. = FALSE
      )
    }
    dataset <- fitted[[1L]]
  }
  dataset <- fitted_dataset(x, dataset)
  values <- fit_values(x, dataset, "plot()")
  n <- length(values)
  # the values but a fraction `tail` at each end, as FitResult.plot in Python
  lims <- stats::quantile(values, c(tail, 1 - tail), names = FALSE)
  pad <- if (lims[2] > lims[1]) 0.05 * diff(lims) else max(abs(lims[1]), 1) * 0.5
  lo <- lims[1] - pad
  if (lims[1] > 0 && lo <= 0) {
    lo <- lims[1] / 2
  }
  hi <- lims[2] + pad
  counts <- isTRUE(attr(x, "family") %in% c("poisson", "negbinom"))
  if (counts) {
    # counts: the probabilities of the whole numbers in view (at most 1000 of them),
    # over bars of whole-number widths centred on the counts
    lo <- max(0, floor(lo))
    hi <- ceiling(hi)
    grid <- if (hi - lo < 1000) lo:hi else unique(round(seq(lo, hi, length.out = 1000L)))
    if (missing(breaks)) {
      width <- max(1, ceiling((hi - lo + 1) / 60))
      breaks <- seq(lo - 0.5, by = width, length.out = ceiling((hi - lo + 1) / width) + 1L)
    }
  } else {
    grid <- seq(lo, hi, length.out = 1000L)
  }
  comp <- component_values(x, dataset, grid) # from the components table, in R
  mixture <- rowSums(comp)
  h <- graphics::hist(values[values >= lo & values <= hi], breaks = breaks, plot = FALSE)
  inside <- values >= min(h$breaks) & values <= max(h$breaks)
  h$counts <- graphics::hist(values[inside], breaks = h$breaks, plot = FALSE)$counts
  h$density <- h$counts / (n * diff(h$breaks)) # of all values, as the fitted density
  outside <- n - sum(h$counts)
  if (is.null(main)) {
    main <- sprintf("dataset %s: %d-component %s mixture", format(dataset),
      ncol(comp), attr(x, "family"))
  }
  plot(h, freq = FALSE, col = "grey88", border = "grey60", main = main, xlab = xlab,
    xlim = if (counts) c(lo - 0.5, hi + 0.5) else c(lo, hi),
    ylim = c(0, 1.05 * max(h$density, mixture, na.rm = TRUE)), ...
  )
  cols <- grDevices::hcl.colors(max(ncol(comp), 2L), "Dark 3")
  dots <- counts && length(grid) <= 100L # the probabilities of a few counts as points
  type <- if (dots) "b" else "l"
  graphics::lines(grid, mixture, col = "navy", lwd = 2, type = type, pch = 19, cex = 0.7)
  for (j in seq_len(ncol(comp))) {
    graphics::lines(grid, comp[, j], col = cols[j], lwd = 1.5, lty = 2, type = type, pch = 1,
                    cex = 0.7)
  }
  if (isTRUE(legend)) {
    rows <- x$components[x$components$dataset == dataset, , drop = FALSE]
    weights <- rows$weight[order(rows$component)]
    data_label <- if (outside > 0L) {
      sprintf("data (%d values; %d outside the plot)", n, outside)
    } else {
      sprintf("data (%d values)", n)
    }
    graphics::legend("topright",
      bty = "n",
      legend = c(data_label, "fitted mixture",
        sprintf("component %d (weight %.2f)", seq_len(ncol(comp)), weights)),
      col = c("grey60", "navy", cols[seq_len(ncol(comp))]),
      lty = c(NA, 1, rep(2, ncol(comp))), lwd = c(NA, 2, rep(1.5, ncol(comp))),
      pch = c(15, if (dots) c(19, rep(1, ncol(comp))) else rep(NA, ncol(comp) + 1L)),
      pt.cex = c(2, rep(if (dots) 0.7 else 2, ncol(comp) + 1L))
    )
  }
  invisible(x)
}

bulkem <- function(datasets, num.components = 2, max.iters = 100, random.inits = 1,
                   use.gpu = NA, epsilon = 1e-6, verbose = FALSE, seed = NULL) {
  if (!is.logical(use.gpu) || length(use.gpu) != 1L) {
    stop("`use.gpu` must be TRUE, FALSE or NA, got ",
      paste(deparse(use.gpu), collapse = ""), ".",
      call. = FALSE
    )
  }
  backend <- if (is.na(use.gpu)) "auto" else if (use.gpu) "cuda" else "cpu"
  run <- run_fit(
    datasets,
    family = "invgauss", components = num.components, starts = random.inits,
    max_iter = max.iters, tol = epsilon, seed = seed, backend = backend,
    dtype = "float64", init = NULL, strict = FALSE, progress = verbose,
    interface = "bulkem", accel = FALSE # the original package's plain EM
  )
  tables <- r_tables(run$py, run$ids)
  warn_not_converged(tables$summary$status, max.iters, epsilon, interface = "bulkem")
  if (isTRUE(verbose)) {
    message(sprintf(
      "bulkem: %d datasets fitted on the %s backend",
      nrow(tables$summary), reticulate::py_to_r(run$py$backend)
    ))
  }
  m <- reticulate::py_to_r(run$py$n_components)
  s <- tables$summary
  comp <- tables$components
  sv <- tables$start_values
  fits <- lapply(seq_len(nrow(s)), function(i) {
    id <- s$dataset[i]
    rows <- comp[comp$dataset == id, , drop = FALSE]
    best <- s$best_start[i]
    init <- sv[sv$dataset == id & !is.na(best) & sv$start == best, , drop = FALSE]
    pick <- function(table, col) {
      if (nrow(table) == m) table[[col]][order(table$component)] else rep(NA_real_, m)
    }
    list(
      lambda = pick(rows, "lambda"),
      mu = pick(rows, "mu"),
      alpha = pick(rows, "weight"),
      init_lambda = pick(init, "lambda"),
      init_mu = pick(init, "mu"),
      init_alpha = pick(init, "weight"),
      loglik = as.double(s$loglik[i]),
      num_iterations = as.integer(s$n_iter[i]),
      fit_success = identical(s$status[i], "converged")
    )
  })
  if (!identical(run$ids, "position")) {
    names(fits) <- as.character(s$dataset)
  }
  fits
}
