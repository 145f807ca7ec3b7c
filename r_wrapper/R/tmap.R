# Transient Markovian arrival processes (TMAPs) with Erlang branches: fit_tmap()
# (bulkem.fit(family = "tmap") in Python) and what a fit computes: parameters,
# moments, samples and scores. A trace is a set of runs of inter-arrival times.

fit_tmap <- function(data, orders = c(1, 2, 3), starts = 10, max_iter = 100, tol = 1e-6,
                     seed = NULL, backend = "auto", dtype = "float64", init = NULL,
                     drop_bad_runs = FALSE, strict = FALSE, progress = FALSE,
                     trace_col = "trace", run_col = "run", value_col = "value",
                     checkpoint = NULL, se = FALSE, criterion = "bic", bootstrap = 0,
                     bootstrap_level = 0.95, accel = NULL, weights = NULL) {
  checked <- check_orders_grid(orders)
  orders <- checked$orders
  one_string(trace_col, "trace_col")
  one_string(run_col, "run_col")
  one_string(value_col, "value_col")
  one_number(tol, "tol")
  check_se(se)
  check_criterion(criterion)
  n_boot <- check_bootstrap(bootstrap, bootstrap_level)
  check_accel(accel)
  if (checked$grid) {
    check_grid_args(orders, "orders", init, checkpoint, bootstrap = n_boot, maker = "fit_tmap")
  }
  if (!is.logical(drop_bad_runs) || length(drop_bad_runs) != 1L || is.na(drop_bad_runs)) {
    stop("`drop_bad_runs` must be TRUE or FALSE, got ",
      paste(deparse(drop_bad_runs), collapse = ""), ".",
      call. = FALSE
    )
  }
  cp <- checkpoint_start(checkpoint)
  module <- bulkem_module()
  if (!is.null(weights)) {
    weights <- py_weights(weights)
  }
  batch <- py_tmap_batch(data, trace_col, run_col, value_col,
                         extra = if (is.character(weights)) weights)
  terms <- list(ids = batch$ids, interface = "fit_tmap")
  args <- list( # (evaluated here: R's argument errors are not Python's)
    module$fit, batch$py,
    family = "tmap",
    orders = if (checked$grid) {
      reticulate::r_to_py(lapply(orders, function(o) reticulate::tuple(as.list(o))))
    } else {
      reticulate::tuple(as.list(orders))
    },
    n_starts = py_int(starts, "starts"),
    max_iter = py_int(max_iter, "max_iter"),
    tol = as.double(tol),
    seed = checkpoint_seed(seed, cp),
    backend = backend,
    dtype = dtype,
    init = py_tmap_init(init),
    strict = isTRUE(strict),
    progress = isTRUE(progress),
    dataset_col = batch$trace_col,
    value_col = value_col,
    run_col = run_col,
    drop_bad_runs = drop_bad_runs,
    checkpoint = cp$path,
    se = se,
    criterion = criterion,
    bootstrap = n_boot,
    bootstrap_level = as.double(bootstrap_level),
    accel = accel,
    .terms = terms
  )
  if (!is.null(weights)) { # (only when given: one weight per run)
    args$weights <- weights
  }
  py <- do.call(py_call, args)
  how <- list(ids = batch$ids, labels = batch$labels, orders = orders,
              drop_bad_runs = drop_bad_runs, se = se, criterion = criterion,
              bootstrap = bootstrap, bootstrap_level = bootstrap_level)
  fit <- tmap_fit(py, how, checkpoint = checkpoint_done(cp))
  warn_not_converged(fit$summary$status, max_iter, tol)
  fit
}

# The R fit of a Python result of bulkem.fit(family = "tmap"), of one size or
# a grid of sizes (see selection.R): fit_tmap(), and fit_size() of a grid fit.
# how: what fit_tmap() knew besides the result (trace ids, run labels, the
# orders: a vector, or a list of them for a grid; drop_bad_runs, se, criterion,
# bootstrap, bootstrap_level).
tmap_fit <- function(py, how, checkpoint = NULL) {
  grid <- py_grid(py, how)
  tables <- r_tables(py, how$ids, key = "trace", grid = grid)
  transitions <- r_table(py$transitions)
  transitions$trace <- r_ids(transitions$trace, how$ids)
  summary <- tables$summary
  summary$message <- relabel_sequences(summary$message, how$labels, word = "run")
  orders <- if (is.null(grid)) how$orders else grid$sizes
  structure(
    c(
      list(
        summary = summary,
        components = tables$components,
        transitions = transitions,
        starts = tables$starts,
        start_values = tables$start_values
      ),
      if (!is.null(grid)) list(selection = tables$selection),
      if (!is.null(tables$intervals)) list(intervals = tables$intervals)
    ),
    class = "bulkem_tmap",
    backend = reticulate::py_to_r(py$backend),
    seed = as.numeric(reticulate::py_str(py$seed)),
    family = "tmap",
    orders = orders,
    n_components = if (is.null(grid)) length(orders) else lengths(orders),
    elapsed = reticulate::py_to_r(py$elapsed),
    ids = how$ids,
    checkpoint = checkpoint,
    saved = saved_state(py, list(orders = orders, drop_bad_runs = how$drop_bad_runs),
                        values = FALSE),
    vcov = saved_vcov(py, how$ids, how$se),
    grid = grid,
    bootstrap = bootstrap_attr(py, how),
    python = py
  )
}

print.bulkem_tmap <- function(x, ...) {
  s <- x$summary
  counts <- table(s$status)
  orders <- attr(x, "orders")
  grid <- attr(x, "grid")
  branches <- if (is.null(grid)) {
    sprintf("%d Erlang branch%s of orders %s", length(orders),
            if (length(orders) == 1L) "" else "es", paste(orders, collapse = ", "))
  } else {
    grid_heading(grid, "Erlang branch orders")
  }
  cat(sprintf(
    "bulkem fit: TMAP, %s, %d trace%s, backend %s, seed %.0f, %.3g s\n",
    branches, nrow(s), if (nrow(s) == 1L) "" else "s", attr(x, "backend"), attr(x, "seed"),
    attr(x, "elapsed")
  ))
  print_grid(x, "trace")
  cat("status:", paste(names(counts), counts, sep = " ", collapse = ", "), "\n")
  cat("Tables: $summary, $components (order, rate, alpha, exit per branch), $transitions (pi), ",
      "$starts, $start_values", if (!is.null(grid)) ", $selection (every size)",
      if (!is.null(x$intervals)) paste0(", $intervals (", bootstrap_text(x), ")"), "\n",
      sep = "")
  print(utils::head(s[, print_columns(x, c("trace", "n_obs", "status", "loglik", "n_iter",
                                           "bic"))], 10L))
  if (nrow(s) > 10L) {
    cat("... ", nrow(s) - 10L, " more traces\n", sep = "")
  }
  invisible(x)
}

logLik.bulkem_tmap <- logLik.bulkem_fit

nobs.bulkem_tmap <- nobs.bulkem_fit

as.data.frame.bulkem_tmap <- as.data.frame.bulkem_fit

`[.bulkem_tmap` <- `[.bulkem_fit`

# A row per trace: alpha[i], rate[i] (branch i, from 1) and pi[i,j] (from the R tables).
# A grid fit's traces have their chosen size's branches: columns for the most
# branches chosen, NA beyond a trace's own.
coef.bulkem_tmap <- function(object, ...) {
  s <- object$summary
  comp <- object$components
  tr <- object$transitions
  R <- if (is.null(attr(object, "grid"))) {
    attr(object, "n_components")
  } else {
    max(c(0L, comp$branch))
  }
  pairs <- expand.grid(to = seq_len(R), from = seq_len(R))
  cols <- c(sprintf("alpha[%d]", seq_len(R)), sprintf("rate[%d]", seq_len(R)),
            sprintf("pi[%d,%d]", pairs$from, pairs$to))
  out <- matrix(NA_real_, nrow(s), length(cols), dimnames = list(as.character(s$trace), cols))
  row <- match(as.character(comp$trace), as.character(s$trace))
  out[cbind(row, comp$branch)] <- comp$alpha
  out[cbind(row, R + comp$branch)] <- comp$rate
  row <- match(as.character(tr$trace), as.character(s$trace))
  out[cbind(row, 2L * R + (tr$from_branch - 1L) * R + tr$to_branch)] <- tr$pi
  out
}

tmap_params <- function(fit, trace) {
  check_fit_class(fit, "bulkem_tmap", "fit_tmap")
  id <- fitted_trace(fit, trace)
  comp <- fit$components[as.character(fit$components$trace) == as.character(id), ,
                         drop = FALSE]
  comp <- comp[order(comp$branch), , drop = FALSE]
  R <- nrow(comp) # (the trace's chosen size in a grid fit)
  tr <- fit$transitions[as.character(fit$transitions$trace) == as.character(id), ,
                        drop = FALSE]
  pi <- matrix(0, R, R)
  pi[cbind(tr$from_branch, tr$to_branch)] <- tr$pi
  list(alpha = comp$alpha, pi = pi, rates = comp$rate)
}

tmap_moments <- function(fit, trace = NULL) {
  py <- python_of(fit, "bulkem_tmap", "fit_tmap")
  s <- fit$summary
  traces <- if (is.null(trace)) {
    s$trace
  } else { # ids as in the summary (a factor's, a number's), checked
    do.call(c, lapply(seq_along(trace), function(k) fitted_trace(fit, trace[k])))
  }
  rows <- lapply(seq_along(traces), function(k) {
    id <- traces[k]
    if (is.null(trace) && !as.character(id) %in% as.character(fit$components$trace)) {
      return(c(NA_real_, NA_real_, NA_real_)) # (every trace asked for: no fit, no moments)
    }
    m <- py_call(py$moments, tmap_py_id(fit, id), .terms = tmap_terms(fit))
    vapply(c("mean_run_length", "mean_interarrival", "corr_x1_x2"), function(key) {
      as.double(reticulate::py_to_r(reticulate::py_get_item(m, key)))
    }, numeric(1))
  })
  values <- matrix(unlist(rows), ncol = 3L, byrow = TRUE)
  out <- data.frame(trace = traces[seq_len(nrow(values))], stringsAsFactors = FALSE)
  out$mean_run_length <- values[, 1L]
  out$mean_interarrival <- values[, 2L]
  out$corr_x1_x2 <- values[, 3L]
  out
}

tmap_sample <- function(fit, trace, n_runs = 1, seed = NULL) {
  py <- python_of(fit, "bulkem_tmap", "fit_tmap")
  n <- py_int(n_runs, "n_runs")
  if (n < 1L) {
    stop("`n_runs` must be >= 1, got ", n, ".", call. = FALSE)
  }
  out <- py_call(py$sample, tmap_py_id(fit, trace),
    n_runs = n, seed = py_int(r_seed(seed), "seed"), return_branches = TRUE,
    .terms = tmap_terms(fit)
  )
  runs <- reticulate::py_get_item(out, 0L)
  branches <- reticulate::py_get_item(out, 1L)
  # one transfer each: the runs' values and branches (from 1 already) concatenated
  np <- reticulate::import("numpy", convert = FALSE)
  builtins <- reticulate::import_builtins(convert = FALSE)
  values <- py_numbers(np$concatenate(runs))
  branch <- as.integer(py_numbers(np$concatenate(branches)))
  lengths <- as.integer(unlist(reticulate::py_to_r(builtins$list(builtins$map(builtins$len,
                                                                              runs)))))
  data.frame(
    run = rep(seq_len(n), lengths),
    step = sequence(lengths),
    value = values,
    branch = branch
  )
}

tmap_score <- function(fit, trace, runs) {
  py <- python_of(fit, "bulkem_tmap", "fit_tmap")
  if (is.null(runs) || is.data.frame(runs) || !(is.list(runs) || is.atomic(runs))) {
    stop("`runs` must be one run (a numeric vector of inter-arrival times) or a list of ",
      "them, got ", if (is.null(runs)) "NULL" else paste("a", class(runs)[1L]), ".",
      call. = FALSE
    )
  }
  seqs <- if (is.list(runs)) runs else list(runs)
  if (length(seqs) == 0L) {
    stop("`runs` is an empty list; expected at least one run.", call. = FALSE)
  }
  arrays <- lapply(seq_along(seqs), function(k) {
    label <- if (is.list(runs)) paste0("run ", k) else "`runs`"
    py_float_array(check_run(seqs[[k]], label))
  })
  reticulate::py_to_r(py_call(py$score, tmap_py_id(fit, trace), reticulate::r_to_py(arrays),
    .terms = tmap_terms(fit)))
}

# --- helpers -------------------------------------------------------------------------------------

tmap_terms <- function(fit) list(ids = attr(fit, "ids"), interface = "fit_tmap")

check_fit_class <- function(fit, class, maker) {
  if (!inherits(fit, class)) {
    stop("`fit` must be the result of ", maker, "(), got a ", class(fit)[1L], ".",
      call. = FALSE
    )
  }
}

# The branch orders as an integer vector, checked.
check_orders <- function(orders) {
  if (!is.numeric(orders) || length(orders) == 0L || anyNA(orders) ||
    any(orders != round(orders)) || any(orders < 1)) {
    stop("`orders` must be a vector of whole numbers >= 1, one per Erlang branch ",
      "(e.g. orders = c(1, 2, 3)), got ", paste(deparse(orders), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (any(orders > .Machine$integer.max)) { # (Python's own limit is far lower, and says so)
    stop("`orders` holds ", format(max(orders)), ", beyond R's integers; Erlang orders are ",
      "whole numbers from 1 to a few thousand.",
      call. = FALSE
    )
  }
  as.integer(orders)
}

# One trace of a fit, checked: its id as in fit$summary$trace (an error when
# it has none or no fitted parameters).
fitted_trace <- function(fit, trace) {
  ids <- fit$summary$trace
  if (length(trace) != 1L || is.na(trace)) {
    stop("`trace` must be one trace id, as in fit$summary$trace.", call. = FALSE)
  }
  pos <- match(as.character(trace), as.character(ids))
  if (is.na(pos)) {
    stop("trace ", dataset_label(trace), " has no fit: no such trace; the fit's traces are ",
      paste(utils::head(format(ids), 10L), collapse = ", "), if (length(ids) > 10L) ", ...",
      ".",
      call. = FALSE
    )
  }
  if (!as.character(trace) %in% as.character(fit$components$trace)) {
    stop("trace ", dataset_label(trace), " has no fit: its status is \"",
      fit$summary$status[pos], "\" (", fit$summary$message[pos], ").",
      call. = FALSE
    )
  }
  ids[[pos]]
}

# An R trace id -> the Python one, checked in R first.
tmap_py_id <- function(fit, trace) {
  python_dataset_id(fit, fitted_trace(fit, trace))
}

# One run's values, checked: a numeric vector (NA stays NaN: Python names the run).
check_run <- function(u, label) {
  if (is.null(u)) {
    return(numeric(0))
  }
  if (is.matrix(u) || is.list(u)) {
    stop(label, " is a ", if (is.matrix(u)) "matrix" else "list", "; expected a numeric vector ",
      "of inter-arrival times.",
      call. = FALSE
    )
  }
  if (!(is.numeric(u) || is.logical(u) && all(is.na(u)))) {
    stop(label, " is ", not_numbers(u), call. = FALSE)
  }
  as.double(u)
}

# The traces of fit_tmap() -> the Python object bulkem.fit takes, with how
# trace ids map back to R ("position", "name" or the codes of a factor or text
# column), the trace column used, and (data.frame input) each trace's run
# labels, for the messages.
# extra: further columns of a data.frame to send (a weight column).
py_tmap_batch <- function(data, trace_col, run_col, value_col, extra = NULL) {
  if (is.data.frame(data)) {
    if (!trace_col %in% names(data) && identical(trace_col, "trace") &&
      "dataset" %in% names(data)) {
      trace_col <- "dataset" # as in Python: a "dataset" column when there is no "trace"
    }
    for (col in c(trace_col, run_col, value_col)) {
      if (!col %in% names(data)) {
        what <- if (col == value_col) {
          "holding the inter-arrival times"
        } else if (col == run_col) {
          "naming each row's run within its trace"
        } else {
          "naming each row's trace"
        }
        arg <- if (col == value_col) "value_col" else if (col == run_col) "run_col" else "trace_col"
        stop("data has columns ", paste(names(data), collapse = ", "), "; expected a column '",
          col, "' ", what, " (pass ", arg, " = \"<column>\" to name another).",
          call. = FALSE
        )
      }
    }
    keep <- unique(c(trace_col, run_col, value_col, intersect(extra, names(data))))
    frame <- py_hmm_frame(data[, keep, drop = FALSE], FALSE,
      trace_col, run_col, value_col, words = c("trace", "run"))
    frame$trace_col <- trace_col
    return(frame)
  }
  if (is.null(data)) {
    stop("data is NULL; expected a data.frame with columns trace, run and value, a list of ",
      "traces (each a list of runs), or one trace (a list of runs).",
      call. = FALSE
    )
  }
  if (!is.list(data) && !is.atomic(data)) {
    stop("data is a ", class(data)[1L], "; expected a data.frame with columns trace, run and ",
      "value, a list of traces (each a list of runs, numeric vectors), or one trace (a list ",
      "of runs).",
      call. = FALSE
    )
  }
  if (!is.list(data)) {
    data <- list(list(data)) # one run: one trace
  } else {
    if (length(data) == 0L) {
      stop("data is an empty list; expected at least one trace.", call. = FALSE)
    }
    nested <- vapply(data, function(d) is.list(d) && !is.data.frame(d), logical(1))
    if (!any(nested)) {
      data <- list(unname(data)) # a list of runs: one trace
    } else if (!all(nested)) {
      stop("data mixes traces (lists of runs, at positions ",
        paste(utils::head(which(nested), 5L), collapse = ", "), ") and single runs (at ",
        "positions ", paste(utils::head(which(!nested), 5L), collapse = ", "),
        "); pass a list of traces, each a list of runs (numeric vectors), or one trace as ",
        "a list of runs.",
        call. = FALSE
      )
    }
  }
  labels <- names(data)
  named <- !is.null(labels)
  if (named && (anyNA(labels) || any(!nzchar(labels)))) {
    stop("data is a list with some names empty; name every trace or none.", call. = FALSE)
  }
  if (named && anyDuplicated(labels)) {
    stop("data has duplicated names (",
      paste(unique(labels[duplicated(labels)]), collapse = ", "),
      "); every trace needs its own name.",
      call. = FALSE
    )
  }
  shown <- if (named) sprintf("'%s'", labels) else seq_along(data)
  counts <- lengths(data)
  runs <- vector("list", sum(counts))
  k <- 0L
  for (i in seq_along(data)) {
    for (j in seq_len(counts[i])) {
      k <- k + 1L
      runs[[k]] <- check_run(data[[i]][[j]], paste0("trace ", shown[i], ", run ", j))
    }
  }
  lens <- vapply(runs, length, integer(1))
  flat <- unlist(runs, use.names = FALSE)
  py <- reticulate::py_call(
    hmm_helper(), py_float_array(if (is.null(flat)) numeric(0) else flat),
    py_int_array(lens), py_int_array(integer(length(lens))), py_int_array(counts),
    if (named) reticulate::r_to_py(as.list(labels)) else NULL
  )
  list(py = py, ids = if (named) "name" else "position", labels = NULL, trace_col = "trace")
}

# init = list(alpha =, pi =, rates =) (pi may be called transmat): one start,
# or with a first dimension of one per start (matrices for alpha and rates, a
# starts x branches x branches array for pi).
py_tmap_init <- function(init) {
  py_named_arrays(init, paste0(
    "`init` must be a named list: alpha (a vector of the branches' start ",
    "probabilities), pi (a branches x branches matrix, rows summing to at most 1) and ",
    "rates (a vector); for several starts, a first dimension of one per start (matrices ",
    "for alpha and rates, a 3-d array for pi). tmap_params() returns this form."
  ))
}
