# Conversions between R values and the Python objects bulkem.fit() takes and
# returns. Done by hand rather than by reticulate's automatic numpy/pandas
# conversion, which in reticulate < 1.35 breaks on numpy >= 2 and pandas >= 3:
# numbers cross as little-endian float64 bytes (exact, NA stays NaN), tables
# come back column by column through Python lists.

py_float_array <- function(x) {
  np <- reticulate::import("numpy", convert = FALSE)
  bytes <- writeBin(as.double(x), raw(), endian = "little")
  np$frombuffer(reticulate::r_to_py(bytes), dtype = "<f8")$copy()
}

py_int_array <- function(x) {
  np <- reticulate::import("numpy", convert = FALSE)
  bytes <- writeBin(as.integer(x), raw(), size = 4L, endian = "little")
  np$frombuffer(reticulate::r_to_py(bytes), dtype = "<i4")$astype("int64")
}

# One dataset: numbers go over as float64 (NA becomes NaN, which bulkem marks
# invalid_data). Text, factors and TRUE/FALSE are refused here, alike for
# bulkem() and fit_mixture(): R converts none of them to numbers silently.
py_dataset <- function(x, label, matrices = FALSE) {
  if (is.data.frame(x) && matrices) {
    x <- as.matrix(x)
  }
  if (is.matrix(x) && matrices && (is.numeric(x) || is.logical(x) && all(is.na(x)))) {
    storage.mode(x) <- "double"
    return(py_hmm_array(x)) # rows: observations, columns: dimensions
  }
  if (is.matrix(x) || is.array(x) && length(dim(x)) > 1L) {
    stop(
      "dataset ", label, " is a matrix of dimension ", paste(dim(x), collapse = " x "),
      "; expected a numeric vector. For one dataset per column pass ",
      "as.list(as.data.frame(m)); for a Gaussian mixture of ", ncol(x), "-dimensional ",
      "observations (a row each) pass family = \"gaussian\".",
      call. = FALSE
    )
  }
  if (is.numeric(x) || is.logical(x) && all(is.na(x))) {
    return(py_float_array(x))
  }
  if (is.null(x)) {
    return(py_float_array(numeric(0)))
  }
  stop("dataset ", label, " is ", not_numbers(x), call. = FALSE)
}

# fit_mixture(weights =): the name of a column of a data.frame of datasets, or the
# weights in the datasets' own form (a numeric vector, a list of them, named as the
# datasets are), converted as datasets are.
py_weights <- function(weights) {
  if (is.character(weights)) {
    one_string(weights, "weights")
    return(weights)
  }
  if (is.data.frame(weights)) {
    stop("`weights` is a data.frame; give a numeric vector per dataset (a list of them) or ",
      "the name of the weight column of the datasets' data.frame.",
      call. = FALSE
    )
  }
  py_datasets(weights)$py
}

# What a non-numeric vector is, and what to do about it.
not_numbers <- function(x) {
  what <- if (is.factor(x)) {
    "a factor"
  } else if (is.character(x)) {
    "text (character)"
  } else if (is.logical(x)) {
    "logical (TRUE/FALSE)"
  } else {
    paste0("a ", class(x)[1L])
  }
  if (is.factor(x) && anyNA(suppressWarnings(as.numeric(levels(x))))) {
    # labels, not numbers written as text: as.numeric(as.character(x)) gives NA
    return(paste0(
      what, " with levels ", paste(utils::head(levels(x), 5L), collapse = ", "),
      if (nlevels(x) > 5L) ", ..." else "", "; expected numbers. Symbols of a hidden ",
      "Markov model go to fit_hmm(emission = \"categorical\"), which takes factors."
    ))
  }
  advice <- if (is.factor(x)) {
    "as.numeric(as.character(x))"
  } else {
    "as.numeric(x)"
  }
  paste0(
    what, "; expected numbers. Convert it with ", advice,
    " first (and look at the values that became NA)."
  )
}

py_column <- function(x) {
  if (is.factor(x)) {
    x <- as.character(x)
  }
  if (is.integer(x) && !anyNA(x)) {
    return(py_int_array(x))
  }
  if (is.numeric(x) || is.logical(x) && all(is.na(x))) {
    return(py_float_array(x))
  }
  values <- as.list(x)
  values[is.na(x)] <- list(NULL)
  reticulate::r_to_py(values)
}

# Datasets in any of the accepted R forms -> the Python object bulkem.fit
# takes. Returns the object and how dataset ids map back to R:
# "position" (Python counts from 0; R shows 1, 2, ...), "name" or "label".
py_datasets <- function(datasets, dataset_col = "dataset", value_col = "value",
                        matrices = FALSE) {
  if (is.data.frame(datasets)) {
    values <- if (all(value_col %in% names(datasets))) {
      value_col
    } else {
      setdiff(names(datasets), c(dataset_col, if (length(value_col) > 1L) value_col))
    }
    for (col in values) {
      x <- datasets[[col]]
      if (!(is.numeric(x) || is.logical(x) && all(is.na(x)))) {
        stop("column '", col, "' of datasets is ", not_numbers(x), call. = FALSE)
      }
    }
    coded <- coded_ids(datasets, dataset_col)
    pd <- reticulate::import("pandas", convert = FALSE)
    columns <- lapply(coded$frame, py_column)
    frame <- pd$DataFrame(reticulate::py_dict(names(coded$frame), unname(columns)))
    return(list(py = frame, ids = coded$ids))
  }
  if (is.list(datasets)) {
    if (length(datasets) == 0L) {
      # Python raises its own message for an empty batch
      return(list(py = reticulate::r_to_py(list()), ids = "position"))
    }
    labels <- names(datasets)
    named <- !is.null(labels)
    if (named && (anyNA(labels) || any(!nzchar(labels)))) {
      stop(
        "datasets is a list with some names empty; name every dataset or none.",
        call. = FALSE
      )
    }
    if (named && anyDuplicated(labels)) {
      stop(
        "datasets has duplicated names (",
        paste(unique(labels[duplicated(labels)]), collapse = ", "),
        "); every dataset needs its own name.",
        call. = FALSE
      )
    }
    shown <- if (named) sprintf("'%s'", labels) else seq_along(datasets)
    items <- Map(py_dataset, unname(datasets), shown, MoreArgs = list(matrices = matrices))
    if (named) {
      return(list(py = reticulate::py_dict(labels, unname(items)), ids = "name"))
    }
    return(list(py = reticulate::r_to_py(unname(items)), ids = "position"))
  }
  if (is.atomic(datasets) || is.null(datasets)) {
    if (is.null(datasets)) {
      stop("datasets is NULL; expected a numeric vector, a list of them or a data.frame.",
        call. = FALSE
      )
    }
    return(list(py = py_dataset(datasets, 1L, matrices), ids = "position"))
  }
  stop(
    "datasets is a ", class(datasets)[1L], "; expected a numeric vector, a list ",
    "of numeric vectors, or a data.frame with columns 'dataset' and 'value'.",
    call. = FALSE
  )
}

# A factor or character dataset column -> integer codes 1, 2, ... and the
# labels they stand for (ids = list(levels =, factor =)): one integer array
# crosses to Python instead of one Python string per row (2,000 datasets x
# 200 values as text took a minute). For a factor the rows are ordered by
# code (a stable order: each dataset's values keep theirs), so the datasets
# come back in level order; text keeps the order of first appearance. Other
# columns: ids = "label".
coded_ids <- function(frame, col) {
  x <- frame[[col]]
  if (!(is.factor(x) || is.character(x))) {
    return(list(frame = frame, ids = "label", rows = NULL))
  }
  levels <- if (is.factor(x)) levels(x) else unique(x[!is.na(x)])
  codes <- if (is.factor(x)) as.integer(x) else match(x, levels)
  frame[[col]] <- codes
  rows <- NULL # the new order of the rows, when they move
  if (is.factor(x) && is.unsorted(codes, na.rm = TRUE)) {
    rows <- order(codes)
    frame <- frame[rows, , drop = FALSE]
  }
  list(frame = frame, ids = list(levels = levels, factor = is.factor(x)), rows = rows)
}

# One pandas column -> an R vector.
r_column <- function(col) {
  kind <- reticulate::py_to_r(col$dtype$kind)
  n <- reticulate::py_len(col)
  builtins <- reticulate::import_builtins(convert = FALSE)
  has_na <- isTRUE(reticulate::py_to_r(builtins$bool(col$isna()$any())))
  values <- function() reticulate::py_to_r(col$tolist())
  if (kind %in% c("i", "u") && !has_na) {
    return(as.integer(unlist(values())))
  }
  if (kind %in% c("i", "u", "f")) {
    return(as.double(unlist(reticulate::py_to_r(
      col$astype("float64")$tolist()
    ))))
  }
  if (kind == "b" && !has_na) {
    return(as.logical(unlist(values())))
  }
  if (n == 0L) {
    return(character(0))
  }
  items <- values()
  missing <- as.logical(unlist(reticulate::py_to_r(col$isna()$tolist())))
  present <- items[!missing]
  out <- rep(NA, n)
  if (all(vapply(present, is.numeric, logical(1)))) {
    out[!missing] <- unlist(present)
    return(as.numeric(out))
  }
  if (all(vapply(present, is.logical, logical(1)))) {
    out[!missing] <- unlist(present)
    return(as.logical(out))
  }
  out <- rep(NA_character_, n)
  out[!missing] <- vapply(present, function(v) paste(format(v), collapse = " "), character(1))
  out
}

# A pandas DataFrame -> an R data.frame with the same column names.
r_table <- function(frame) {
  names <- unlist(reticulate::py_to_r(frame$columns$tolist()))
  frame <- frame$reset_index(drop = TRUE)
  cols <- lapply(names, function(nm) r_column(reticulate::py_get_item(frame, nm)))
  names(cols) <- names
  as.data.frame(cols, stringsAsFactors = FALSE, optional = TRUE)
}

# Python dataset ids -> R ids: positions count from 1 in R.
r_ids <- function(ids, how) {
  if (is.list(how)) { # codes of a factor or text column
    labels <- how$levels[ids]
    return(if (isTRUE(how$factor)) factor(labels, levels = how$levels) else labels)
  }
  if (identical(how, "position") && is.numeric(ids)) {
    return(as.integer(ids + 1L))
  }
  ids
}

# R dataset id -> the Python id.
py_id <- function(id, how) {
  if (is.list(how)) {
    code <- match(as.character(id), how$levels)
    if (is.na(code)) {
      stop("dataset \"", as.character(id), "\" has no fit: no such dataset.", call. = FALSE)
    }
    return(code)
  }
  if (identical(how, "position")) {
    return(as.integer(id) - 1L)
  }
  id
}

# A count or seed -> a Python int (never a float).
py_int <- function(x, name, null_ok = FALSE) {
  if (is.null(x) && null_ok) {
    return(NULL)
  }
  if (!is.numeric(x) || length(x) != 1L || is.na(x) || x != round(x)) {
    stop(
      "`", name, "` must be one whole number, got ",
      paste(deparse(x), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (abs(x) <= .Machine$integer.max) {
    return(as.integer(x))
  }
  # beyond R's integers (a large seed): exact up to 2^53
  builtins <- reticulate::import_builtins(convert = FALSE)
  builtins$int(sprintf("%.0f", x))
}

# init = list(weight =, mu =, lambda =) (the family's blocks: weight, rate for a Poisson
# mixture; weight, meanlog, varlog for a log-normal one; weight, shape, rate for a gamma
# one; weight, mean, var for a Gaussian one, weight, mean, cov with full covariance
# matrices, weight, mean and var (one per component) with spherical ones): vectors of
# length M (one start) or k x M matrices (k starts, one per row); a Gaussian's mean, var
# (diagonal) and cov (full: each component's lower triangle, row by row, as the columns
# cov_1_1, cov_2_1, cov_2_2, ...) M x D (M x T) matrices or k x M x D (k x M x T) arrays.
# cov may also be a list of M covariance matrices (D x D, symmetric), or a list of k such
# lists (see py_cov_block()).
py_init <- function(init, family = "invgauss", covariance_type = NULL) {
  if (is.null(init)) {
    return(NULL)
  }
  if (identical(family, "gaussian") && is.null(covariance_type)) {
    covariance_type <- "diag"
  }
  if (is.data.frame(init) || !is.list(init) || is.null(names(init))) {
    stop(
      "`init` must be a named list with elements ", switch(family,
        gaussian = init_gaussian_text(covariance_type),
        poisson = paste0("weight and rate, each a vector (one start) or a matrix with one ",
                         "row per start."),
        negbinom = paste0("weight, size and mu, each a vector (one start) or a matrix with ",
                          "one row per start."),
        lognormal = paste0("weight, meanlog and varlog, each a vector (one start) or a matrix ",
                           "with one row per start."),
        gamma = paste0("weight, shape and rate, each a vector (one start) or a matrix with ",
                       "one row per start."),
        paste0("weight, mu and lambda, each a vector (one start) or a matrix with one row ",
               "per start.")
      ),
      call. = FALSE
    )
  }
  if (isTRUE(covariance_type %in% c("full", "tied")) && is.list(init$cov)) {
    init$cov <- py_cov_block(init$cov, "init$cov", starts = TRUE)
  }
  out <- lapply(init, function(v) {
    if (is.array(v) && is.numeric(v)) { # matrices and arrays, in numpy's row-major order
      flat <- py_float_array(as.vector(aperm(v)))
      do.call(flat$reshape, lapply(dim(v), function(n) py_int(n, "dim")))
    } else if (is.numeric(v)) {
      py_float_array(v)
    } else {
      reticulate::r_to_py(v)
    }
  })
  reticulate::py_dict(names(init), unname(out))
}

# What init of a Gaussian mixture holds, by covariance type (for the message).
init_gaussian_text <- function(covariance_type) {
  weight <- "weight (a vector, one start, or a matrix with one row per start), "
  switch(if (is.null(covariance_type)) "diag" else covariance_type,
    full = paste0(weight, "mean (a components x dimensions matrix, or an array starts x ",
                  "components x dimensions) and cov (the covariance matrices: a components ",
                  "x D(D+1)/2 matrix of their lower triangles row by row, as the columns ",
                  "cov_1_1, cov_2_1, cov_2_2, ..., or an array starts x components x ",
                  "D(D+1)/2; or a list of the components' D x D matrices, or a list of such ",
                  "lists, one per start)."),
    tied = paste0(weight, "mean (a components x dimensions matrix, or an array starts x ",
                  "components x dimensions) and cov (the one covariance matrix, in every ",
                  "component's row: as for covariance_type = \"full\", the same matrix ",
                  "for each component)."),
    spherical = paste0(weight, "mean (a components x dimensions matrix, or an array starts x ",
                       "components x dimensions) and var (one variance per component: a ",
                       "vector, or a matrix with one row per start)."),
    paste0(weight, "mean and var (components x dimensions matrices, or arrays starts x ",
           "components x dimensions).")
  )
}

# The cov block of a Gaussian mixture with full covariance matrices given as R
# matrices -> the layout Python takes, each component's lower triangle row by row
# (lower_rows()): a list of M symmetric D x D matrices -> an M x T matrix (T = D (D + 1)
# / 2); with starts = TRUE (init), a list of k such lists -> a k x M x T array. Any other
# value is returned as it is (numbers in Python's layout already; Python checks them).
py_cov_block <- function(v, arg, starts = FALSE) {
  if (!is.list(v) || is.data.frame(v) || length(v) == 0L) {
    return(v)
  }
  nested <- vapply(v, is.list, logical(1))
  if (starts && all(nested)) { # one list of matrices per start
    sets <- lapply(seq_along(v), function(s) {
      py_cov_block(v[[s]], paste0(arg, "[[", s, "]]"))
    })
    dims <- lapply(sets, dim)
    if (length(unique(dims)) != 1L) {
      stop(arg, " is a list of ", length(v), " starts whose covariance matrices differ in ",
        "number or size; give every start one D x D matrix per component.",
        call. = FALSE
      )
    }
    out <- array(0, c(length(sets), dims[[1L]]))
    for (s in seq_along(sets)) {
      out[s, , ] <- sets[[s]]
    }
    return(out)
  }
  form <- paste0(" must be a covariance matrix (a symmetric D x D numeric matrix), one per ",
                 "component")
  D <- NULL
  rows <- lapply(seq_along(v), function(j) {
    S <- v[[j]]
    where <- paste0(arg, "[[", j, "]]")
    if (!is.matrix(S) || !is.numeric(S) || nrow(S) != ncol(S)) {
      got <- if (is.matrix(S)) {
        sprintf("a %d x %d %s matrix", nrow(S), ncol(S), typeof(S))
      } else {
        paste0("a ", class(S)[1L])
      }
      stop(where, form, if (starts) " (or, for several starts, a list of such lists)",
        "; got ", got, ".",
        call. = FALSE
      )
    }
    if (is.null(D)) {
      D <<- nrow(S)
    } else if (nrow(S) != D) {
      stop(where, " is ", nrow(S), " x ", nrow(S), " but ", arg, "[[1]] is ", D, " x ", D,
        "; every component's covariance matrix has the data's dimensions.",
        call. = FALSE
      )
    }
    if (!isSymmetric(unname(S))) {
      stop(where, " is not symmetric; a covariance matrix is (S[i, j] == S[j, i]).",
        call. = FALSE
      )
    }
    lower_rows(S)
  })
  matrix(unlist(rows), nrow = length(rows), byrow = TRUE)
}
