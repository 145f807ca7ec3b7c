# Marginal likelihoods of many series under linear-Gaussian state-space models:
# state_space() (bulkem.StateSpace in Python) and kalman_loglik()
# (bulkem.kalman_loglik), the Kalman filter over every series at once.

state_space <- function(F, H, Q, R, m0 = NULL, P0 = NULL) {
  F <- ss_matrix(F, "F", NULL, NULL, "a square matrix, dim_state x dim_state")
  nx <- nrow(F)
  if (ncol(F) != nx) {
    stop("`F` is a ", nrow(F), " x ", ncol(F), " matrix; expected a square matrix ",
      "(dim_state x dim_state: the transition of the hidden state).",
      call. = FALSE
    )
  }
  if (is.null(dim(H)) && is.numeric(H) && length(H) == nx) {
    H <- matrix(H, nrow = 1L) # a vector: one row (one observed value per step)
  }
  H <- ss_matrix(H, "H", NULL, nx, paste0("dim_obs x dim_state, with dim_state = ", nx,
                                            " from F; a vector of ", nx, " values is one row"))
  ny <- nrow(H)
  Q <- ss_matrix(Q, "Q", nx, nx, paste0("dim_state x dim_state, dim_state = ", nx, " from F"))
  R <- ss_matrix(R, "R", ny, ny, paste0("dim_obs x dim_obs, dim_obs = ", ny, " from H"))
  if (is.null(m0)) {
    m0 <- numeric(nx)
  }
  if (!is.numeric(m0) || length(m0) != nx || length(dim(m0)) > 2L ||
    (!is.null(dim(m0)) && min(dim(m0)) != 1L)) {
    stop("`m0` must be a numeric vector of ", nx, " values (the prior mean of the first ",
      "state; dim_state = ", nx, " from F), got ", ss_what(m0), ".",
      call. = FALSE
    )
  }
  ss_finite(m0, "m0")
  if (!is.null(P0)) {
    P0 <- ss_matrix(P0, "P0", nx, nx, paste0("dim_state x dim_state, dim_state = ", nx,
                                             " from F"))
  }
  # Python checks the covariances (symmetric, positive semi-definite) and, for
  # P0 = NULL, solves for the stationary covariance; its matrices come back.
  py <- py_state_space(list(F = F, H = H, Q = Q, R = R, m0 = as.double(m0), P0 = P0))
  back <- lapply(c("F", "H", "Q", "R", "P0"), function(name) {
    py_matrix(reticulate::py_get_attr(py, name))
  })
  names(back) <- c("F", "H", "Q", "R", "P0")
  structure(
    list(F = back$F, H = back$H, Q = back$Q, R = back$R,
         m0 = py_numbers(py$m0), P0 = back$P0),
    class = "bulkem_state_space"
  )
}

print.bulkem_state_space <- function(x, ...) {
  cat(sprintf("bulkem state-space model: dim_state = %d, dim_obs = %d\n", nrow(x$F), nrow(x$H)))
  cat("  x[t+1] = F x[t] + w,  w ~ N(0, Q);  y[t] = H x[t] + v,  v ~ N(0, R);  x[1] ~ N(m0, P0)\n")
  for (name in c("F", "H", "Q", "R", "m0", "P0")) {
    cat(name, ":\n", sep = "")
    v <- x[[name]]
    print(if (is.matrix(v)) v else matrix(v, nrow = 1L), ...)
  }
  invisible(x)
}

kalman_loglik <- function(series, model, method = "exact", window = NULL, backend = "auto",
                          dtype = "float64", report_error = FALSE, splash_var = NULL,
                          series_col = "series", value_col = "value") {
  one_string(method, "method")
  one_string(series_col, "series_col")
  if (!is.null(value_col) && (!is.character(value_col) || length(value_col) < 1L ||
    anyNA(value_col))) {
    stop("`value_col` must name the value column (or, for dim_obs > 1, one column per ",
      "observed value), or be NULL (every column but series_col), got ",
      paste(deparse(value_col), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (!is.logical(report_error) || length(report_error) != 1L || is.na(report_error)) {
    stop("`report_error` must be TRUE or FALSE, got ",
      paste(deparse(report_error), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (!is.null(splash_var)) {
    one_number(splash_var, "splash_var")
  }
  models <- kalman_models(model)
  ny <- nrow(models[[1L]]$H)
  module <- bulkem_module()
  batch <- py_kalman_series(series, ny, series_col, value_col)
  if (!inherits(model, "bulkem_state_space") && length(models) != batch$n) {
    stop(length(models), " models for ", batch$n, " series; pass one model for every series ",
      "or a list of one model per series, in the order of the series.",
      call. = FALSE
    )
  }
  py_models <- lapply(models, py_state_space)
  terms <- list(ids = batch$ids, interface = "kalman_loglik")
  out <- py_call(
    module$kalman_loglik, batch$py,
    if (length(models) == 1L && inherits(model, "bulkem_state_space")) py_models[[1L]] else
      reticulate::r_to_py(py_models),
    method = method,
    window = if (is.null(window)) NULL else py_int(window, "window"),
    backend = backend,
    dtype = dtype,
    report_error = report_error,
    splash_var = if (is.null(splash_var)) NULL else as.double(splash_var),
    series_col = series_col,
    value_col = batch$value_col,
    .terms = terms
  )
  table <- r_table(out)
  table$series <- r_ids(table$series, batch$ids)
  table$n_obs <- as.integer(table$n_obs)
  table$message <- vapply(table$message, function(m) {
    if (is.na(m) || !nzchar(m)) m else r_message(m, terms)
  }, character(1), USE.NAMES = FALSE)
  table
}

# --- helpers -------------------------------------------------------------------------------------

# A short description of what an argument is, for the messages.
ss_what <- function(x) {
  if (is.null(x)) {
    return("NULL")
  }
  if (!is.numeric(x) && !is.logical(x)) {
    return(paste("a", class(x)[1L]))
  }
  if (!is.null(dim(x))) {
    return(paste0("a ", paste(dim(x), collapse = " x "), " ", if (length(dim(x)) == 2L) "matrix"
                  else "array"))
  }
  if (length(x) == 1L) "one number" else paste0("a vector of ", length(x), " values")
}

ss_finite <- function(x, name) {
  bad <- sum(!is.finite(x))
  if (bad) {
    stop("`", name, "` has ", bad, " NA, NaN or infinite entr", if (bad == 1L) "y" else "ies",
      "; expected finite numbers.",
      call. = FALSE
    )
  }
}

# A model matrix: a numeric matrix of nrow x ncol (NULL: any); one number
# stands for a 1 x 1 matrix.
ss_matrix <- function(x, name, nrow, ncol, hint) {
  if (is.data.frame(x)) {
    x <- as.matrix(x)
  }
  if (!is.numeric(x) || length(dim(x)) > 2L) {
    stop("`", name, "` is ", ss_what(x), "; expected a numeric matrix (", hint, ").",
      call. = FALSE
    )
  }
  given <- ss_what(x)
  if (is.null(dim(x)) && length(x) == 1L) {
    x <- matrix(x, 1L, 1L) # one number: a 1 x 1 matrix
  }
  if (is.null(dim(x)) || (!is.null(nrow) && nrow(x) != nrow) ||
    (!is.null(ncol) && ncol(x) != ncol)) {
    want <- paste0(if (is.null(nrow)) "k" else nrow, " x ", if (is.null(ncol)) "k" else ncol)
    want <- if (is.null(nrow) && is.null(ncol)) "a matrix" else paste("a", want, "matrix")
    stop("`", name, "` is ", given, "; expected ", want, " (", hint, ").",
      call. = FALSE
    )
  }
  ss_finite(x, name)
  storage.mode(x) <- "double"
  x
}

# An R state-space model -> a bulkem.StateSpace (its checks run in Python).
py_state_space <- function(m) {
  module <- bulkem_module()
  py_call(module$StateSpace, py_hmm_array(m$F), py_hmm_array(m$H), py_hmm_array(m$Q),
    py_hmm_array(m$R), py_float_array(m$m0), if (is.null(m$P0)) NULL else py_hmm_array(m$P0),
    .terms = list(interface = "state_space"))
}

# `model` of kalman_loglik(): one state_space() or a list of them, of one size.
kalman_models <- function(model) {
  if (inherits(model, "bulkem_state_space")) {
    return(list(model))
  }
  if (!is.list(model) || length(model) == 0L ||
    !all(vapply(model, inherits, logical(1), "bulkem_state_space"))) {
    stop("`model` must be a model made by state_space() or a list of them (one per ",
      "series), got ", if (is.list(model) && length(model)) "a list holding other things" else
        ss_what(model), ".",
      call. = FALSE
    )
  }
  dims <- vapply(model, function(m) paste0(nrow(m$F), " x ", nrow(m$H)), character(1))
  if (length(unique(dims)) > 1L) {
    stop("The models have different sizes (dim_state x dim_obs: ",
      paste(unique(dims), collapse = ", "), "); every model of one call needs the same. ",
      "Call kalman_loglik() once per size.",
      call. = FALSE
    )
  }
  unname(model)
}

# The series of kalman_loglik() -> the Python object it takes, with how series
# ids map back to R, how many series there are and the value column(s).
py_kalman_series <- function(series, ny, series_col, value_col) {
  if (is.data.frame(series)) {
    return(py_kalman_frame(series, ny, series_col, value_col))
  }
  if (is.null(series) || !(is.list(series) || is.atomic(series))) {
    stop("`series` must be a list of series (numeric vectors",
      if (ny > 1L) paste0(", or matrices of ", ny, " columns") else "", "), one series, or a ",
      "long data.frame with columns series and value, got ", ss_what(series), ".",
      call. = FALSE
    )
  }
  if (!is.list(series)) {
    series <- list(series) # one series
  }
  if (length(series) == 0L) {
    stop("`series` is an empty list; expected at least one series.", call. = FALSE)
  }
  labels <- names(series)
  named <- !is.null(labels)
  if (named && (anyNA(labels) || any(!nzchar(labels)))) {
    stop("`series` is a list with some names empty; name every series or none.", call. = FALSE)
  }
  if (named && anyDuplicated(labels)) {
    stop("`series` has duplicated names (",
      paste(unique(labels[duplicated(labels)]), collapse = ", "),
      "); every series needs its own name.",
      call. = FALSE
    )
  }
  shown <- if (named) sprintf("'%s'", labels) else seq_along(series)
  values <- lapply(seq_along(series), function(k) {
    s <- series[[k]]
    label <- paste0("series ", shown[k])
    if (is.data.frame(s)) {
      s <- as.matrix(s)
    }
    if (is.list(s) || !(is.numeric(s) || is.logical(s) && all(is.na(s)))) {
      stop(label, " is ", if (is.list(s)) "a list; expected a numeric vector or matrix." else
        not_numbers(s), call. = FALSE)
    }
    if (is.matrix(s)) {
      if (ncol(s) != ny) {
        stop(label, " is a matrix of ", ncol(s), " column", if (ncol(s) == 1L) "" else "s",
          "; the model observes dim_obs = ", ny, " value", if (ny == 1L) "" else "s",
          " per time step: pass ", if (ny == 1L) "a numeric vector" else
            paste0("a matrix of ", ny, " columns (a row per time step)"),
          ", or a model of dim_obs = ", ncol(s), ".",
          call. = FALSE
        )
      }
      return(as.vector(t(s)))
    }
    if (ny > 1L) {
      stop(label, " is a vector; the model observes dim_obs = ", ny, " values per time ",
        "step: pass a matrix of ", ny, " columns (a row per time step).",
        call. = FALSE
      )
    }
    as.double(s)
  })
  lens <- vapply(values, length, integer(1)) %/% ny
  flat <- unlist(values, use.names = FALSE)
  py <- reticulate::py_call(
    kalman_helper(), py_float_array(if (is.null(flat)) numeric(0) else flat),
    py_int_array(lens), py_int(ny, "ny"),
    if (named) reticulate::r_to_py(as.list(labels)) else NULL
  )
  list(py = py, ids = if (named) "name" else "position", n = length(series),
       value_col = "value")
}

py_kalman_frame <- function(data, ny, series_col, value_col) {
  if (!series_col %in% names(data)) {
    stop("series has columns ", paste(names(data), collapse = ", "), "; expected a column '",
      series_col, "' naming each row's series (pass series_col = \"<column>\" to name ",
      "another).",
      call. = FALSE
    )
  }
  cols <- if (is.null(value_col) || (ny > 1L && identical(value_col, "value") &&
    !"value" %in% names(data))) {
    setdiff(names(data), series_col) # every other column
  } else {
    value_col
  }
  missing <- setdiff(cols, names(data))
  if (length(missing)) {
    stop("series has columns ", paste(names(data), collapse = ", "), "; no column ",
      paste0("'", missing, "'", collapse = ", "), " (pass value_col = \"<column>\" to name ",
      "the values", if (ny > 1L) ", one column per observed value" else "", ").",
      call. = FALSE
    )
  }
  if (length(cols) != ny) {
    stop("series has ", length(cols), " value column", if (length(cols) == 1L) "" else "s",
      " (", paste(cols, collapse = ", "), "); the model observes dim_obs = ", ny,
      " value", if (ny == 1L) "" else "s", " per time step. Name ", ny, " column",
      if (ny == 1L) "" else "s", " with value_col.",
      call. = FALSE
    )
  }
  for (col in cols) {
    v <- data[[col]]
    if (!(is.numeric(v) || is.logical(v) && all(is.na(v)))) {
      stop("column '", col, "' of series is ", not_numbers(v), call. = FALSE)
    }
  }
  n_na <- sum(is.na(data[[series_col]]))
  if (n_na) {
    stop("column '", series_col, "' of series has ", n_na, " NA value", if (n_na > 1L) "s" else
      "", "; every row needs its series.",
      call. = FALSE
    )
  }
  coded <- coded_ids(data[, c(series_col, cols), drop = FALSE], series_col)
  pd <- reticulate::import("pandas", convert = FALSE)
  frame <- pd$DataFrame(reticulate::py_dict(names(coded$frame),
                                            unname(lapply(coded$frame, py_column))))
  list(py = frame, ids = coded$ids, n = length(unique(data[[series_col]])),
       value_col = if (length(cols) == 1L) cols else as.list(cols))
}

# A Python function that splits R's series (one float64 vector, each series'
# rows one after the other) into a list or dict of arrays, (T,) or (T, ny):
# one transfer from R instead of one per series.
kalman_helper <- function() {
  if (is.null(.state$kalman_batch)) {
    code <- paste(
      "def batch(flat, lens, ny, names):",
      "    import numpy as np",
      "    cut = np.cumsum(lens * ny)[:-1]",
      "    parts = np.split(flat, cut) if len(lens) else []",
      "    seqs = [p.reshape(-1, ny) if ny > 1 else p for p in parts]",
      "    return seqs if names is None else dict(zip(names, seqs))",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$kalman_batch <- reticulate::py_get_item(env, "batch")
  }
  .state$kalman_batch
}
