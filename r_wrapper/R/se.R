# Standard errors of the fitted parameters: the argument se = TRUE of the
# fitting functions (bulkem.fit(se=True) in Python, which adds se_ columns to
# the tables) and vcov(), the covariance matrix of a dataset's parameters.
#
# A fit made with se = TRUE keeps the covariance matrices on the R side
# (attribute "vcov": an array parameter x parameter x dataset, the third
# dimension named by the R ids of the fitted datasets), so that vcov() needs
# no Python and works on a fit saved with saveRDS() and read back.

# se: TRUE or FALSE, checked (the value passed to Python's fit(se=...)).
check_se <- function(se) {
  if (!is.logical(se) || length(se) != 1L || is.na(se)) {
    stop("`se` must be TRUE or FALSE, got ", paste(deparse(se), collapse = ""), ".",
      call. = FALSE
    )
  }
  se
}

# A Python function: the covariances of a FitResult (fit(se=True)) as one
# array, with the Python ids of the datasets and the parameters' names. A grid
# fit's datasets have different parameters: {'parts': one such answer per
# size, of the datasets that chose it; 'order': the datasets}.
covariance_helper <- function() {
  if (is.null(.state$covariances)) {
    code <- paste(
      "def covariances(res):",
      "    import numpy as np",
      "    def plain(k):",
      "        return k.item() if isinstance(k, np.generic) else k",
      "    def one(res, only):",
      "        table = res.tables.get('covariances')",
      "        key = table.iloc[:, 0].to_numpy(dtype=object) if table is not None else []",
      "        ids = [k for k in dict.fromkeys(key) if only is None or k in only]",
      "        names = [str(n) for n in res.cov(ids[0]).index] if ids else []",
      "        P = len(names)",
      "        block = np.empty(len(ids), dtype=object)",
      "        block[:] = ids",
      "        if ids and len(key) == len(ids) * P * P and bool(",
      "                (key == np.repeat(block, P * P)).all()):",
      "            arr = table['cov'].to_numpy(dtype=np.float64).reshape(len(ids), P, P)",
      "        elif ids:  # (not one block per dataset: dataset by dataset)",
      "            arr = np.stack([res.cov(k).to_numpy(dtype=np.float64) for k in ids])",
      "        else:",
      "            arr = np.zeros((0, P, P))",
      "        return {'ids': [plain(k) for k in ids], 'names': names, 'n': len(ids),",
      "                'values': bytearray(np.ascontiguousarray(arr, '<f8').tobytes())}",
      "    if getattr(res, '_sizes', None):",
      "        return {'parts': [one(part, {k for k, c in res._chosen.items() if c == size})",
      "                          for size, part in res._sizes.items()],",
      "                'order': [plain(k) for k in res._chosen]}",
      "    return one(res, None)",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$covariances <- reticulate::py_get_item(env, "covariances")
  }
  .state$covariances
}

# What a fit keeps of its Python result's covariances (the attribute "vcov"):
# NULL without se, else an array P x P x (fitted datasets) with dimnames
# list(parameter, parameter, R dataset id); for a grid fit, whose datasets
# have the parameters of their chosen sizes, a list of P x P matrices named by
# the R dataset ids.
saved_vcov <- function(py, ids, se) {
  if (!isTRUE(se)) {
    return(NULL)
  }
  k <- reticulate::py_call(covariance_helper(), py)
  if (!reticulate::py_to_r(k$`__contains__`("parts"))) {
    return(vcov_array(k, ids))
  }
  parts <- reticulate::py_get_item(k, "parts")
  out <- list()
  for (i in seq_len(reticulate::py_len(parts)) - 1L) {
    cv <- vcov_array(reticulate::py_get_item(parts, i), ids)
    for (j in seq_len(dim(cv)[3L])) {
      out[[dimnames(cv)[[3L]][j]]] <- matrix(cv[, , j], nrow = dim(cv)[1L],
                                             dimnames = dimnames(cv)[1:2])
    }
  }
  order <- unlist(reticulate::py_to_r(reticulate::py_get_item(k, "order")))
  if (length(order)) { # in the order of the datasets
    out <- out[intersect(as.character(r_ids(order, ids)), names(out))]
  }
  out
}

# The covariances of one answer of covariance_helper() as an array (see saved_vcov()).
vcov_array <- function(k, ids) {
  get <- function(key) reticulate::py_to_r(reticulate::py_get_item(k, key))
  names <- as.character(unlist(get("names")))
  n <- as.integer(get("n"))
  P <- length(names)
  values <- py_doubles(reticulate::py_get_item(k, "values"), n * P * P)
  r_id <- if (n > 0L) as.character(r_ids(unlist(get("ids")), ids)) else character(0)
  # Python's (n, P, P) in C order -> R's [P, P, n] (column-major): transpose each
  out <- aperm(array(values, c(P, P, n)), c(2L, 1L, 3L))
  dimnames(out) <- list(names, names, r_id)
  out
}

# vcov(fit, dataset): the covariance matrix of one dataset's parameters.
fit_vcov <- function(object, dataset, maker) {
  cv <- attr(object, "vcov")
  if (is.null(cv)) {
    stop("vcov() needs the covariances of the fitted parameters: fit with se = TRUE (",
      maker, "(..., se = TRUE)).",
      call. = FALSE
    )
  }
  s <- object$summary
  key <- if ("dataset" %in% names(s)) "dataset" else "trace"
  ids <- s[[key]]
  if (is.null(dataset)) {
    if (length(ids) != 1L) {
      stop("This fit has ", length(ids), " ", key, "s; say which with `dataset = ` ",
        "(one of fit$summary$", key, ").",
        call. = FALSE
      )
    }
    dataset <- ids[[1L]]
  }
  if (length(dataset) != 1L || is.na(dataset)) {
    stop("`dataset` must be one ", key, " id, as in fit$summary$", key, ", got ",
      paste(deparse(dataset), collapse = ""), ".",
      call. = FALSE
    )
  }
  pos <- match(as.character(dataset), as.character(ids))
  if (is.na(pos)) {
    stop(key, " ", dataset_label(dataset), " has no fit: no such ", key, ".", call. = FALSE)
  }
  k <- if (is.list(cv)) { # (a grid fit's: a matrix per dataset)
    match(as.character(ids[[pos]]), names(cv))
  } else {
    match(as.character(ids[[pos]]), dimnames(cv)[[3L]])
  }
  if (is.na(k)) {
    stop(key, " ", dataset_label(dataset), " has no fit: its status is \"", s$status[pos],
      "\".",
      call. = FALSE
    )
  }
  if (is.list(cv)) {
    return(cv[[k]])
  }
  out <- matrix(cv[, , k], nrow = dim(cv)[1L], ncol = dim(cv)[2L])
  dimnames(out) <- dimnames(cv)[1:2]
  out
}

vcov.bulkem_fit <- function(object, dataset = NULL, ...) {
  fit_vcov(object, dataset, "fit_mixture")
}

vcov.bulkem_hmm <- function(object, dataset = NULL, ...) {
  fit_vcov(object, dataset, "fit_hmm")
}

vcov.bulkem_tmap <- function(object, dataset = NULL, ...) {
  fit_vcov(object, dataset, "fit_tmap")
}

vcov.bulkem_ssm <- function(object, dataset = NULL, ...) {
  fit_vcov(object, dataset, "fit_ssm")
}
