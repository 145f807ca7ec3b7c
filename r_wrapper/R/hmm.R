# Hidden Markov models: fit_hmm() (tidy tables, as bulkem.fit(family = "hmm")
# in Python) and what a fit computes: Viterbi paths, posterior state
# probabilities, scores, samples, parameters, a plot of a decoded path.

fit_hmm <- function(data, components, emission = "categorical", symbols = NULL, starts = 10,
                    max_iter = 100, tol = 1e-6, seed = NULL, backend = "auto",
                    dtype = "float64", init = NULL, params = "ste", reg_covar = 1e-6,
                    strict = FALSE, progress = FALSE, dataset_col = "dataset",
                    sequence_col = "sequence", value_col = "value", checkpoint = NULL, se = FALSE,
                    criterion = "bic", bootstrap = 0, bootstrap_level = 0.95, accel = NULL,
                    weights = NULL, ...) {
  if (missing(components)) {
    stop("`components` (the number of hidden states) is missing; e.g. fit_hmm(data, 3).",
      call. = FALSE
    )
  }
  one_string(emission, "emission")
  one_string(params, "params")
  one_string(dataset_col, "dataset_col")
  one_string(sequence_col, "sequence_col")
  if (!is.character(value_col) || length(value_col) < 1L || anyNA(value_col)) {
    stop("`value_col` must name one column (or, for emission = \"gaussian\", several), got ",
      paste(deparse(value_col), collapse = ""), ".",
      call. = FALSE
    )
  }
  one_number(tol, "tol")
  one_number(reg_covar, "reg_covar")
  check_se(se)
  check_criterion(criterion)
  n_boot <- check_bootstrap(bootstrap, bootstrap_level)
  check_accel(accel)
  n_components <- py_sizes(components, "components")
  if (length(components) > 1L) {
    check_grid_args(components, "components", init, checkpoint, bootstrap = n_boot,
                    maker = "fit_hmm")
  }
  gaussian <- identical(emission, "gaussian")
  if (!is.null(weights)) {
    weights <- py_weights(weights)
    if (is.character(weights) && gaussian && is.data.frame(data) &&
      identical(value_col, "value") && !"value" %in% names(data)) {
      # every column but the keys and the weights holds the observations
      value_col <- setdiff(names(data), c(dataset_col, sequence_col, weights))
    }
  }
  cp <- checkpoint_start(checkpoint)
  module <- bulkem_module()
  coded <- if (identical(emission, "categorical")) {
    factor_symbols(data, value_col)
  } else {
    list(data = data, levels = NULL)
  }
  data <- coded$data
  if (is.null(symbols) && !is.null(coded$levels)) {
    symbols <- length(coded$levels)
  }
  batch <- py_hmm_batch(data, gaussian, dataset_col, sequence_col, value_col)
  terms <- list(ids = batch$ids, interface = "fit_hmm")
  args <- list(
    module$fit, batch$py,
    family = "hmm",
    n_components = n_components,
    n_starts = py_int(starts, "starts"),
    max_iter = py_int(max_iter, "max_iter"),
    tol = as.double(tol),
    seed = checkpoint_seed(seed, cp),
    backend = backend,
    dtype = dtype,
    init = py_hmm_init(init),
    strict = isTRUE(strict),
    progress = isTRUE(progress),
    dataset_col = dataset_col,
    value_col = if (length(value_col) == 1L) value_col else as.list(value_col),
    reg_covar = as.double(reg_covar),
    emission = emission,
    params = params,
    sequence_col = sequence_col,
    checkpoint = cp$path,
    se = se,
    criterion = criterion,
    bootstrap = n_boot,
    bootstrap_level = as.double(bootstrap_level),
    accel = accel
  )
  if (!is.null(symbols)) {
    args$n_symbols <- py_int(symbols, "symbols")
  }
  if (!is.null(weights)) { # (only when given: one weight per sequence)
    args$weights <- weights
  }
  args <- c(args, py_options(list(...)), list(.terms = terms))
  py <- do.call(py_call, args)
  how <- list(
    ids = batch$ids, lengths = batch$lengths, labels = batch$labels, emission = emission,
    params = params, symbols = symbols, levels = coded$levels, se = se, criterion = criterion,
    bootstrap = bootstrap, bootstrap_level = bootstrap_level
  )
  fit <- hmm_fit(py, how, checkpoint = checkpoint_done(cp))
  warn_not_converged(fit$summary$status, max_iter, tol)
  fit
}

# The R fit of a Python result of bulkem.fit(family = "hmm"), of one size or a
# grid of sizes (see selection.R): fit_hmm(), and fit_size() of a grid fit.
# how: what fit_hmm() knew besides the result (dataset ids, sequence lengths
# and labels, the emission, params, the number of symbols given, a factor's
# levels, se, criterion, bootstrap, bootstrap_level).
hmm_fit <- function(py, how, checkpoint = NULL) {
  emission <- how$emission
  grid <- py_grid(py, how)
  tables <- r_tables(py, how$ids, grid = grid)
  transitions <- r_table(py$transitions)
  transitions$dataset <- r_ids(transitions$dataset, how$ids)
  summary <- tables$summary
  summary$message <- relabel_sequences(summary$message, how$labels)
  comps <- tables$components
  n_symbols <- if (identical(emission, "categorical")) {
    sum(startsWith(names(comps), "prob_"))
  } else {
    NA_integer_
  }
  n_dims <- if (identical(emission, "gaussian")) sum(startsWith(names(comps), "mean_")) else 1L
  levels <- how$levels
  if (!is.null(levels)) { # prob_0, prob_1, ... -> prob_<level>, symbols from 1
    probs <- startsWith(names(comps), "prob_")
    names(comps)[probs] <- paste0("prob_", levels[seq_len(sum(probs))])
    probs <- startsWith(names(comps), "se_prob_") # (fit with se = TRUE)
    names(comps)[probs] <- paste0("se_prob_", levels[seq_len(sum(probs))])
    sv <- tables$start_values
    probs <- startsWith(names(sv), "prob_")
    names(sv)[probs] <- paste0("prob_", levels[seq_len(sum(probs))])
    tables$start_values <- sv
    iv <- tables$intervals # (bootstrap = B) prob_<state>_<symbol> -> prob_<state>_<level>
    if (!is.null(iv)) {
      hit <- regmatches(iv$parameter, regexec("^prob_([0-9]+)_([0-9]+)$", iv$parameter))
      k <- vapply(hit, function(h) if (length(h) == 3L) as.integer(h[3L]) + 1L else NA_integer_,
                  integer(1))
      at <- !is.na(k) & k <= length(levels)
      iv$parameter[at] <- paste0("prob_", vapply(hit[at], `[`, "", 2L), "_", levels[k[at]])
      tables$intervals <- iv
    }
  }
  symbols <- how$symbols
  structure(
    c(
      list(
        summary = summary,
        components = comps,
        transitions = transitions,
        starts = tables$starts,
        start_values = tables$start_values
      ),
      if (!is.null(grid)) list(selection = tables$selection),
      if (!is.null(tables$intervals)) list(intervals = tables$intervals)
    ),
    class = "bulkem_hmm",
    backend = reticulate::py_to_r(py$backend),
    seed = as.numeric(reticulate::py_str(py$seed)),
    family = "hmm",
    emission = emission,
    n_components = if (is.null(grid)) reticulate::py_to_r(py$n_components) else grid$sizes,
    n_symbols = as.integer(n_symbols),
    n_dims = as.integer(n_dims),
    symbol_levels = levels,
    elapsed = reticulate::py_to_r(py$elapsed),
    ids = how$ids,
    sequence_lengths = how$lengths,
    sequence_labels = how$labels,
    checkpoint = checkpoint,
    saved = saved_state(py, c(list(emission = emission, params = how$params),
                              if (!is.null(symbols)) list(n_symbols = as.integer(symbols))),
                        n_symbols = n_symbols),
    vcov = saved_vcov(py, how$ids, how$se),
    grid = grid,
    bootstrap = bootstrap_attr(py, how),
    python = py
  )
}

print.bulkem_hmm <- function(x, ...) {
  s <- x$summary
  counts <- table(s$status)
  emission <- attr(x, "emission")
  detail <- if (identical(emission, "categorical")) {
    sprintf(" (%d symbols)", attr(x, "n_symbols"))
  } else if (identical(emission, "gaussian") && attr(x, "n_dims") > 1L) {
    sprintf(" (%d dimensions)", attr(x, "n_dims"))
  } else {
    ""
  }
  grid <- attr(x, "grid")
  states <- if (is.null(grid)) {
    sprintf("%d states", attr(x, "n_components"))
  } else {
    grid_heading(grid, "states")
  }
  cat(sprintf(
    paste0("bulkem fit: hidden Markov model, %s, %s emission%s, %d dataset%s, ",
           "backend %s, seed %.0f, %.3g s\n"),
    states, emission, detail, nrow(s), if (nrow(s) == 1L) "" else "s",
    attr(x, "backend"), attr(x, "seed"), attr(x, "elapsed")
  ))
  print_grid(x, word = "states")
  cat("status:", paste(names(counts), counts, sep = " ", collapse = ", "), "\n")
  cat("Tables: $summary, $components, $transitions, $starts, $start_values",
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

hmm_decode <- function(fit, dataset, sequences) {
  py <- python_of(fit, "bulkem_hmm", "fit_hmm")
  seqs <- py_hmm_sequences(fit, sequences)
  out <- py_call(py$decode, python_dataset_id(fit, dataset), seqs$py, .terms = hmm_terms(fit))
  logprob <- reticulate::py_get_item(out, 0L)
  paths <- reticulate::py_get_item(out, 1L)
  if (seqs$single) {
    return(list(logprob = reticulate::py_to_r(logprob), path = as.integer(py_numbers(paths))))
  }
  list(
    logprob = py_numbers(logprob),
    path = lapply(seq_len(seqs$n) - 1L, function(i) {
      as.integer(py_numbers(reticulate::py_get_item(paths, i)))
    })
  )
}

hmm_posterior <- function(fit, dataset, sequences) {
  py <- python_of(fit, "bulkem_hmm", "fit_hmm")
  seqs <- py_hmm_sequences(fit, sequences)
  out <- py_call(py$predict_proba, python_dataset_id(fit, dataset), seqs$py,
    .terms = hmm_terms(fit)
  )
  label <- function(m) {
    colnames(m) <- paste0("state_", seq_len(ncol(m)))
    m
  }
  if (seqs$single) {
    return(label(py_matrix(out)))
  }
  lapply(seq_len(seqs$n) - 1L, function(i) label(py_matrix(reticulate::py_get_item(out, i))))
}

hmm_score <- function(fit, dataset, sequences) {
  py <- python_of(fit, "bulkem_hmm", "fit_hmm")
  seqs <- py_hmm_sequences(fit, sequences)
  out <- py_call(py$score, python_dataset_id(fit, dataset), seqs$py, .terms = hmm_terms(fit))
  reticulate::py_to_r(out)
}

hmm_sample <- function(fit, dataset, n_sequences = 1, length = 100, seed = NULL) {
  py <- python_of(fit, "bulkem_hmm", "fit_hmm")
  n <- py_int(n_sequences, "n_sequences")
  steps <- py_int(length, "length")
  if (n < 1L || steps < 1L) {
    stop("`n_sequences` and `length` must be >= 1, got ", n, " and ", steps, ".", call. = FALSE)
  }
  out <- py_call(py$sample, python_dataset_id(fit, dataset),
    n_sequences = n, length = steps,
    seed = py_int(r_seed(seed), "seed"), .terms = hmm_terms(fit)
  )
  seqs <- reticulate::py_get_item(out, 0L)
  states <- reticulate::py_get_item(out, 1L)
  values <- do.call(rbind, lapply(seq_len(n) - 1L, function(i) {
    py_matrix(reticulate::py_get_item(seqs, i))
  }))
  frame <- data.frame(
    sequence = rep(seq_len(n), each = steps),
    step = rep(seq_len(steps), times = n),
    state = unlist(lapply(seq_len(n) - 1L, function(i) {
      as.integer(py_numbers(reticulate::py_get_item(states, i)))
    }))
  )
  levels <- attr(fit, "symbol_levels")
  if (!is.null(levels)) {
    frame$value <- factor(levels[values[, 1L] + 1L], levels = levels)
  } else if (ncol(values) == 1L) {
    frame$value <- values[, 1L]
  } else {
    for (d in seq_len(ncol(values))) frame[[paste0("value_", d)]] <- values[, d]
  }
  frame
}

# From the fit's tables (so a fit read back with readRDS() needs no Python):
# the parameters in hmmlearn's shapes, as the Python result's params().
hmm_params <- function(fit, dataset) {
  check_fit_class(fit, "bulkem_hmm", "fit_hmm")
  id <- fitted_dataset(fit, dataset)
  rows <- fit$components[as.character(fit$components$dataset) == as.character(id), ,
                         drop = FALSE]
  rows <- rows[order(rows$state), , drop = FALSE]
  n <- nrow(rows)
  tr <- fit$transitions[as.character(fit$transitions$dataset) == as.character(id), ,
                        drop = FALSE]
  transmat <- matrix(0, n, n)
  transmat[cbind(tr$from_state, tr$to_state)] <- tr$prob
  out <- list(startprob = rows$startprob, transmat = transmat)
  emission <- attr(fit, "emission")
  block <- function(prefix) {
    m <- as.matrix(rows[, startsWith(names(rows), prefix), drop = FALSE])
    dimnames(m) <- NULL
    m
  }
  if (identical(emission, "categorical")) {
    out$emissionprob <- block("prob_")
  } else if (identical(emission, "gaussian")) {
    out$means <- block("mean_")
    out$vars <- block("var_")
  } else {
    out$lambdas <- rows$lambda
  }
  out
}

plot.bulkem_hmm <- function(x, dataset = NULL, sequence = NULL, dim = 1, main = NULL,
                            xlab = "step", ylab = NULL, legend = TRUE, ...) {
  py <- python_of(x, "bulkem_hmm", "fit_hmm")
  s <- x$summary
  if (is.null(dataset)) {
    fitted <- s$dataset[s$status %in% c("converged", "max_iter")]
    if (base::length(fitted) == 0L) {
      stop("No dataset of this fit has fitted parameters (see fit$summary$status).",
        call. = FALSE
      )
    }
    dataset <- fitted[[1L]]
  }
  dataset <- fitted_dataset(x, dataset)
  id <- python_dataset_id(x, dataset)
  terms <- hmm_terms(x)
  values <- as.matrix(fit_values(x, dataset, "plot()"))
  D <- attr(x, "n_dims")
  if (!is.numeric(dim) || base::length(dim) != 1L || !dim %in% seq_len(D)) {
    stop("`dim` must be one of 1..", D, " (the dimensions of the observations), got ",
      paste(deparse(dim), collapse = ""), ".",
      call. = FALSE
    )
  }
  pos <- match(dataset, s$dataset)
  lengths <- attr(x, "sequence_lengths")[[pos]]
  labels <- attr(x, "sequence_labels")
  labels <- if (is.null(labels)) NULL else labels[[pos]]
  k <- pick_sequence(sequence, lengths, labels)
  first <- sum(lengths[seq_len(k - 1L)])
  y <- values[first + seq_len(lengths[k]), , drop = FALSE]
  decoded <- py_call(py$decode, id, py_hmm_array(if (D == 1L) y[, 1L] else y), .terms = terms)
  path <- as.integer(py_numbers(reticulate::py_get_item(decoded, 1L)))
  logprob <- reticulate::py_to_r(reticulate::py_get_item(decoded, 0L))
  rows <- x$components[x$components$dataset == dataset, , drop = FALSE]
  rows <- rows[order(rows$state), , drop = FALSE]
  level <- state_levels(rows, attr(x, "emission"), dim)
  n_states <- nrow(rows)
  cols <- grDevices::hcl.colors(max(n_states, 2L), "Dark 3")[seq_len(n_states)]
  obs <- y[, dim]
  steps <- seq_along(obs)
  shown <- if (is.null(labels)) k else format(labels[k])
  if (is.null(main)) {
    main <- sprintf("dataset %s, sequence %s: decoded states (log-probability %.1f)",
      format(dataset), shown, logprob)
  }
  if (is.null(ylab)) {
    ylab <- switch(attr(x, "emission"),
      categorical = "symbol", poisson = "count",
      gaussian = if (D > 1L) sprintf("value (dimension %d)", dim) else "value"
    )
  }
  old <- graphics::par(mar = c(5.1, 4.1, 4.1, 4.6))
  on.exit(graphics::par(old), add = TRUE)
  lims <- range(obs, level, finite = TRUE)
  if (isTRUE(legend)) {
    lims[2] <- lims[2] + 0.18 * diff(lims) # room for the legend above the data
  }
  graphics::plot(steps, obs, type = "n", main = main, xlab = xlab, ylab = ylab, ylim = lims, ...)
  graphics::points(steps, obs, pch = 16, cex = 0.8, col = grDevices::adjustcolor(cols[path], 0.8))
  n <- base::length(steps)
  # a step per observation, centred on it
  graphics::lines(c(steps, n + 1) - 0.5, level[c(path, path[n])],
    type = "s", lwd = 2, col = "grey20"
  )
  graphics::axis(4, at = level, labels = seq_len(n_states), las = 1, col.axis = "grey20")
  graphics::mtext("decoded state (at its emission's location)", side = 4, line = 2.6, cex = 0.8)
  if (isTRUE(legend)) {
    graphics::legend("top",
      bty = "n", cex = 0.85, ncol = min(n_states + 1L, 4L),
      legend = c("decoded path (Viterbi)", sprintf("decoded state %d", seq_len(n_states))),
      col = c("grey20", cols), lty = c(1, rep(NA, n_states)), lwd = c(2, rep(NA, n_states)),
      pch = c(NA, rep(16, n_states))
    )
  }
  invisible(x)
}

# --- helpers -------------------------------------------------------------------------------------

one_string <- function(x, name) {
  if (!is.character(x) || length(x) != 1L || is.na(x)) {
    stop("`", name, "` must be one string, got ", paste(deparse(x), collapse = ""), ".",
      call. = FALSE
    )
  }
}

one_number <- function(x, name) {
  if (!is.numeric(x) || length(x) != 1L || is.na(x)) {
    stop("`", name, "` must be one number >= 0, got ", paste(deparse(x), collapse = ""), ".",
      call. = FALSE
    )
  }
}

# The Python result behind a fit of class `class`, made by the R function
# `maker`: its own, or one made again from the parameters the fit keeps (a fit
# saved and read back; see saved.R).
python_of <- function(fit, class, maker) {
  check_fit_class(fit, class, maker)
  fit_result_python(fit)
}

hmm_terms <- function(fit) list(ids = attr(fit, "ids"), interface = "fit_hmm")

# Further arguments of bulkem.fit from `...`: named; whole numbers as Python ints.
py_options <- function(opts) {
  if (length(opts) && (is.null(names(opts)) || any(!nzchar(names(opts))))) {
    stop("Arguments in `...` are passed on to bulkem.fit in Python and must be named ",
      "(e.g. init_method = \"kmeans++\").",
      call. = FALSE
    )
  }
  lapply(opts, function(v) {
    if (is.numeric(v) && length(v) == 1L && !is.na(v) && v == round(v) &&
      abs(v) <= .Machine$integer.max) {
      as.integer(v)
    } else {
      v
    }
  })
}

# Python's "sequence k" (k from 0 within a dataset) in the summary's messages ->
# "sequence <label>" (the data.frame's label) or "sequence k + 1" (a position).
# word: "sequence", or "run" for a TMAP's runs.
relabel_sequences <- function(messages, labels, word = "sequence") {
  vapply(seq_along(messages), function(i) {
    msg <- messages[i]
    if (is.na(msg) || !grepl(paste0("\\b", word, " [0-9]"), msg, perl = TRUE)) {
      return(msg)
    }
    lab <- if (is.null(labels)) NULL else labels[[i]]
    relabel_numbers(msg, word, function(k) {
      if (is.null(lab) || k + 1L > length(lab)) {
        k + 1L
      } else if (is.character(lab) || is.factor(lab)) {
        paste0("\"", as.character(lab[k + 1L]), "\"")
      } else {
        lab[k + 1L]
      }
    })
  }, character(1))
}

# The position of the sequence to plot: a label of the data.frame's sequence
# column, else a position (from 1).
pick_sequence <- function(sequence, lengths, labels) {
  if (is.null(sequence)) {
    return(1L)
  }
  if (length(sequence) != 1L) {
    stop("`sequence` must be one sequence.", call. = FALSE)
  }
  if (!is.null(labels)) {
    k <- match(as.character(sequence), as.character(labels))
    if (is.na(k)) {
      stop("This dataset has no sequence labelled ", deparse(sequence), "; its sequences are ",
        paste(utils::head(format(labels), 10L), collapse = ", "),
        if (length(labels) > 10L) ", ..." else "", ".",
        call. = FALSE
      )
    }
    return(k)
  }
  if (!is.numeric(sequence) || sequence != round(sequence) || sequence < 1L ||
    sequence > length(lengths)) {
    stop("`sequence` must be a position 1..", length(lengths), " in this dataset, got ",
      paste(deparse(sequence), collapse = ""), ".",
      call. = FALSE
    )
  }
  as.integer(sequence)
}

# Where each state's step is drawn: the location its states are ordered by.
state_levels <- function(rows, emission, dim) {
  if (identical(emission, "categorical")) {
    probs <- as.matrix(rows[, startsWith(names(rows), "prob_"), drop = FALSE])
    symbols <- suppressWarnings(as.integer(sub("prob_", "", colnames(probs), fixed = TRUE)))
    if (anyNA(symbols)) {
      symbols <- seq_len(ncol(probs)) # symbols named by a factor's levels: 1, 2, ...
    }
    return(as.vector(probs %*% symbols))
  }
  if (identical(emission, "gaussian")) {
    return(rows[[paste0("mean_", dim)]])
  }
  rows$lambda
}

# numpy shape as an integer vector.
py_shape <- function(a) as.integer(unlist(reticulate::py_to_r(a$shape)))

# A 1-D or 2-D numpy array -> an R matrix (one column for 1-D).
py_matrix <- function(a) {
  shape <- py_shape(a)
  if (length(shape) == 1L) {
    return(matrix(py_numbers(a), ncol = 1L))
  }
  matrix(py_numbers(a), nrow = shape[1L], ncol = shape[2L], byrow = TRUE)
}

# An R vector or matrix (rows: steps) -> a float64 numpy array of the same shape.
py_hmm_array <- function(x) {
  if (is.matrix(x)) {
    flat <- py_float_array(as.vector(t(x)))
    return(flat$reshape(py_int(nrow(x), "nrow"), py_int(ncol(x), "ncol")))
  }
  py_float_array(x)
}

# Sequences for the result methods: one vector (or matrix) or a list of them.
py_hmm_sequences <- function(fit, sequences) {
  gaussian <- identical(attr(fit, "emission"), "gaussian")
  if (is.data.frame(sequences) || !(is.list(sequences) || is.atomic(sequences)) ||
    is.null(sequences)) {
    stop("`sequences` must be one sequence (a numeric vector",
      if (gaussian) ", or a matrix with a row per step" else "",
      ") or a list of them, got ", if (is.null(sequences)) "NULL" else
        paste("a", class(sequences)[1L]), ".",
      call. = FALSE
    )
  }
  single <- !is.list(sequences)
  seqs <- if (single) list(sequences) else sequences
  if (length(seqs) == 0L) {
    stop("`sequences` is an empty list; expected at least one sequence.", call. = FALSE)
  }
  levels <- attr(fit, "symbol_levels")
  arrays <- lapply(seq_along(seqs), function(k) {
    label <- if (single) "`sequences`" else paste0("sequence ", k)
    s <- seqs[[k]]
    if (!is.null(levels) && (is.factor(s) || is.character(s))) {
      s <- symbol_codes(s, levels, label)
    }
    s <- check_sequence(s, label, gaussian)
    py_hmm_array(s)
  })
  py <- if (single) arrays[[1L]] else reticulate::r_to_py(arrays)
  list(py = py, single = single, n = length(seqs))
}

# One sequence's values, checked: numbers (a matrix only for a Gaussian emission).
check_sequence <- function(s, label, gaussian) {
  if (is.null(s)) {
    return(numeric(0))
  }
  if (is.matrix(s) && !gaussian) {
    stop(label, " is a matrix; expected a numeric vector (a matrix, one row per step, only ",
      "for emission = \"gaussian\").",
      call. = FALSE
    )
  }
  if (is.list(s) || !(is.numeric(s) || is.logical(s) && all(is.na(s)))) {
    if (is.list(s)) {
      stop(label, " is a list; expected a numeric vector",
        if (gaussian) " or a matrix" else "", ".",
        call. = FALSE
      )
    }
    stop(label, " is ", not_numbers(s), call. = FALSE)
  }
  if (is.matrix(s)) {
    storage.mode(s) <- "double"
    return(s)
  }
  as.double(s)
}

# The data of fit_hmm() -> the Python object bulkem.fit takes, with how
# dataset ids map back to R ("position", "name" or "label"), each dataset's
# sequence lengths, and (data.frame input) each dataset's sequence labels.
py_hmm_batch <- function(data, gaussian, dataset_col, sequence_col, value_col) {
  if (is.data.frame(data)) {
    return(py_hmm_frame(data, gaussian, dataset_col, sequence_col, value_col))
  }
  if (is.null(data)) {
    stop("data is NULL; expected a data.frame with columns dataset, sequence, value, ",
      "a list of datasets or one sequence.",
      call. = FALSE
    )
  }
  if (!is.list(data) && !is.atomic(data)) {
    stop("data is a ", class(data)[1L], "; expected a data.frame with columns dataset, ",
      "sequence and value, a list of datasets (each a numeric vector or a list of them), ",
      "or one numeric vector.",
      call. = FALSE
    )
  }
  if (!is.list(data)) {
    data <- list(data) # one sequence: one dataset
  }
  labels <- names(data)
  named <- !is.null(labels)
  if (named && (anyNA(labels) || any(!nzchar(labels)))) {
    stop("data is a list with some names empty; name every dataset or none.", call. = FALSE)
  }
  if (named && anyDuplicated(labels)) {
    stop("data has duplicated names (",
      paste(unique(labels[duplicated(labels)]), collapse = ", "),
      "); every dataset needs its own name.",
      call. = FALSE
    )
  }
  shown <- if (named) sprintf("'%s'", labels) else seq_along(data)
  seqs <- list()
  counts <- integer(length(data))
  for (i in seq_along(data)) {
    d <- data[[i]]
    parts <- if (is.list(d) && !is.data.frame(d)) d else list(d)
    if (is.data.frame(d)) {
      stop("dataset ", shown[i], " is a data.frame; pass the whole batch as one long ",
        "data.frame (columns dataset, sequence, value) instead.",
        call. = FALSE
      )
    }
    counts[i] <- length(parts)
    for (k in seq_along(parts)) {
      label <- if (is.list(d)) paste0("dataset ", shown[i], ", sequence ", k) else
        paste0("dataset ", shown[i])
      seqs[[length(seqs) + 1L]] <- check_sequence(parts[[k]], label, gaussian)
    }
  }
  lens <- vapply(seqs, NROW, integer(1))
  widths <- vapply(seqs, function(s) if (is.matrix(s)) ncol(s) else 0L, integer(1))
  flat <- unlist(lapply(seqs, function(s) if (is.matrix(s)) as.vector(t(s)) else s),
    use.names = FALSE
  )
  py <- reticulate::py_call(
    hmm_helper(), py_float_array(if (is.null(flat)) numeric(0) else flat),
    py_int_array(lens), py_int_array(widths), py_int_array(counts),
    if (named) reticulate::r_to_py(as.list(labels)) else NULL
  )
  ends <- cumsum(counts)
  lengths <- lapply(seq_along(counts), function(i) lens[seq_len(counts[i]) + ends[i] - counts[i]])
  list(py = py, ids = if (named) "name" else "position", lengths = lengths, labels = NULL)
}

# words: what the messages call a dataset and a sequence ("trace", "run" for a TMAP).
py_hmm_frame <- function(data, gaussian, dataset_col, sequence_col, value_col,
                         words = c("dataset", "sequence")) {
  keys <- c(dataset_col, sequence_col)
  have <- keys %in% names(data)
  values <- if (all(value_col %in% names(data))) {
    value_col
  } else if (gaussian && identical(value_col, "value")) {
    setdiff(names(data), keys)
  } else {
    intersect(value_col, names(data))
  }
  for (col in values) {
    v <- data[[col]]
    if (!(is.numeric(v) || is.logical(v) && all(is.na(v)))) {
      stop("column '", col, "' of data is ", not_numbers(v), call. = FALSE)
    }
  }
  for (col in keys[have]) {
    n_na <- sum(is.na(data[[col]]))
    if (n_na) {
      stop("column '", col, "' of data has ", n_na, " NA value", if (n_na > 1L) "s" else "",
        "; every row needs its ", if (col == dataset_col) words[1L] else words[2L], ".",
        call. = FALSE
      )
    }
  }
  coded <- coded_ids(data, dataset_col)
  if (sequence_col %in% names(data)) { # sequences as codes too (their labels stay in R)
    sq <- coded$frame[[sequence_col]]
    if (is.factor(sq) || is.character(sq)) {
      coded$frame[[sequence_col]] <- match(as.character(sq), unique(as.character(sq)))
    }
  }
  pd <- reticulate::import("pandas", convert = FALSE)
  frame <- pd$DataFrame(reticulate::py_dict(names(coded$frame),
                                            unname(lapply(coded$frame, py_column))))
  lengths <- labels <- NULL
  if (all(have)) { # (else Python says which column is missing)
    rows <- if (is.null(coded$rows)) seq_len(nrow(data)) else coded$rows # as sent
    ds <- data[[dataset_col]][rows]
    sq <- data[[sequence_col]][rows]
    if (is.factor(ds)) ds <- as.character(ds)
    if (is.factor(sq)) sq <- as.character(sq)
    d <- match(ds, unique(ds)) # datasets, sequences: in order of first appearance
    pair <- paste(d, match(sq, unique(sq)), sep = ":")
    first <- !duplicated(pair)
    n_rows <- tabulate(match(pair, pair[first]), sum(first))
    by <- factor(d[first], levels = seq_len(max(0L, d)))
    lengths <- unname(split(n_rows, by))
    labels <- unname(split(sq[first], by))
  }
  list(py = frame, ids = coded$ids, lengths = lengths, labels = labels)
}

# A Python function that splits R's sequences (one float64 vector, each
# sequence's rows one after the other) into a list or dict of datasets, each a
# list of arrays: one transfer from R instead of one per sequence.
hmm_helper <- function() {
  if (is.null(.state$hmm_batch)) {
    code <- paste(
      "def batch(flat, lens, widths, counts, names):",
      "    import numpy as np",
      "    sizes = lens * np.maximum(widths, 1)",
      "    parts = np.split(flat, np.cumsum(sizes)[:-1]) if len(sizes) else []",
      "    seqs = [p.reshape(-1, w) if w > 0 else p for p, w in zip(parts, widths.tolist())]",
      "    out, k = [], 0",
      "    for c in counts.tolist():",
      "        out.append(seqs[k:k + c])",
      "        k += c",
      "    return out if names is None else dict(zip(names, out))",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$hmm_batch <- reticulate::py_get_item(env, "batch")
  }
  .state$hmm_batch
}

# init in hmmlearn's shapes: list(startprob =, transmat =, emissionprob = |
# means =, vars = | lambdas =), each for one start, or with a first dimension
# of one per start (a matrix for vectors, a 3-d array for matrices).
py_hmm_init <- function(init) {
  py_named_arrays(init, paste0(
    "`init` must be a named list in hmmlearn's shapes: startprob (a vector of the ",
    "states), transmat (a states x states matrix) and the emission's parameters ",
    "(emissionprob: states x symbols; means and vars: states x dimensions; lambdas: a ",
    "vector), each with a first dimension of one per start for several starts; ",
    "hmm_params() returns this form."
  ))
}

# A named list of numeric arrays (user starting values) -> a Python dict of numpy arrays,
# R's dimensions kept in numpy's row-major order; NULL stays NULL. `form`: the error
# message when `init` is not a named list; `arg`: what the messages call the list
# ("init", "params[[2]]"); `scalars`: blocks that are one number each (the state-space
# models' level0, state_var, obs_var), which go over as a Python float when given as
# one number, so that their shape is () and not (1,).
py_named_arrays <- function(init, form, arg = "init", scalars = character()) {
  if (is.null(init)) {
    return(NULL)
  }
  if (is.data.frame(init) || !is.list(init) || is.null(names(init)) ||
    any(!nzchar(names(init)))) {
    stop(form, call. = FALSE)
  }
  out <- lapply(names(init), function(key) {
    v <- init[[key]]
    if (!is.numeric(v)) {
      stop(arg, "$", key, " is ", not_numbers(v), call. = FALSE)
    }
    dims <- dim(v)
    if (is.null(dims) && length(v) == 1L && key %in% scalars) {
      return(reticulate::r_to_py(as.double(v)))
    }
    if (is.null(dims)) {
      return(py_float_array(v))
    }
    flat <- py_float_array(as.vector(aperm(v))) # row-major, as numpy's C order
    do.call(flat$reshape, lapply(dims, function(n) py_int(n, "dim")))
  })
  reticulate::py_dict(names(init), out)
}

# Categorical symbols given as factors -> the numbers Python takes: level k is
# symbol k - 1 there, and symbol k (from 1) in R, named by the level. Every
# factor of the batch must have the same levels. Returns list(data =, levels =)
# (levels NULL when no factor was found: numbers are symbols 0, 1, ... as in
# hmmlearn).
factor_symbols <- function(data, value_col) {
  levels <- NULL
  take <- function(f, where) {
    if (is.null(levels)) {
      levels <<- levels(f)
    } else if (!identical(levels(f), levels)) {
      stop(where, " is a factor with levels ", paste(utils::head(levels(f), 10L), collapse = ", "),
        " but an earlier one has levels ", paste(utils::head(levels, 10L), collapse = ", "),
        "; give every sequence the same levels (factor(x, levels = ...)).",
        call. = FALSE
      )
    }
    as.integer(f) - 1L
  }
  if (is.data.frame(data)) {
    col <- if (length(value_col) == 1L && value_col %in% names(data)) value_col else NULL
    if (!is.null(col) && is.factor(data[[col]])) {
      data[[col]] <- take(data[[col]], paste0("column '", col, "'"))
    }
    return(list(data = data, levels = levels))
  }
  if (is.factor(data)) {
    return(list(data = take(data, "data"), levels = levels))
  }
  if (is.list(data)) {
    for (i in seq_along(data)) {
      d <- data[[i]]
      if (is.factor(d)) {
        data[[i]] <- take(d, paste("dataset", i))
      } else if (is.list(d) && !is.data.frame(d)) {
        for (k in seq_along(d)) {
          if (is.factor(d[[k]])) {
            d[[k]] <- take(d[[k]], paste0("dataset ", i, ", sequence ", k))
          }
        }
        data[[i]] <- d
      }
    }
  }
  list(data = data, levels = levels)
}

# A sequence of a fit's symbols (a factor or text) -> the numbers Python takes.
symbol_codes <- function(s, levels, label) {
  codes <- match(as.character(s), levels)
  bad <- !is.na(s) & is.na(codes)
  if (any(bad)) {
    stop(label, " has symbols the fit does not know (", paste(utils::head(unique(
      as.character(s[bad])), 5L), collapse = ", "), "); its symbols are ",
      paste(utils::head(levels, 10L), collapse = ", "), ".",
      call. = FALSE
    )
  }
  as.double(codes - 1L)
}
