# The parametric bootstrap of a fit: fit_mixture(), fit_hmm(), fit_tmap() and
# fit_ssm() with bootstrap = B, bootstrap_level = 0.95 (Python's
# bulkem.fit(bootstrap=B)): B datasets drawn from each fitted dataset's best
# fit, refitted, and the percentile intervals of every parameter in the table
# `intervals`, one row per (dataset, parameter) (per (trace, parameter) for a
# TMAP). The fit's attribute "bootstrap" is list(refits =, level =), what was
# asked for (NULL without a bootstrap). And mixture_sample(): values drawn from
# a dataset's fitted mixture.

# bootstrap, bootstrap_level: checked; returns the refits as an R integer (what
# bulkem.fit takes). The level is checked even without refits, as in Python.
check_bootstrap <- function(bootstrap, bootstrap_level) {
  if (!is.numeric(bootstrap) || length(bootstrap) != 1L || is.na(bootstrap) ||
    bootstrap != round(bootstrap) || bootstrap < 0 || bootstrap > .Machine$integer.max) {
    stop("`bootstrap` must be one whole number >= 0 (the bootstrap refits per dataset, ",
      "e.g. 200; 0 for none), got ", paste(deparse(bootstrap), collapse = ""), ".",
      call. = FALSE
    )
  }
  if (!is.numeric(bootstrap_level) || length(bootstrap_level) != 1L ||
    is.na(bootstrap_level) || !(bootstrap_level > 0 && bootstrap_level < 1)) {
    stop("`bootstrap_level` must be one number between 0 and 1, both left out (the ",
      "intervals' coverage, e.g. 0.95), got ", paste(deparse(bootstrap_level), collapse = ""),
      ".",
      call. = FALSE
    )
  }
  as.integer(bootstrap)
}

# Whether a Python result holds the table `name` (FitResult.tables).
py_has_table <- function(py, name) {
  if (!reticulate::py_has_attr(py, "tables")) {
    return(FALSE)
  }
  isTRUE(reticulate::py_to_r(reticulate::py_get_attr(py, "tables")$`__contains__`(name)))
}

# The intervals table of a Python result in R: dataset ids as the other tables.
# Python's table holds the ids as objects (numpy integers for positions and
# codes), cast here to the summary's type so that they cross as numbers.
r_intervals <- function(py, ids, key = "dataset") {
  frame <- reticulate::py_get_item(reticulate::py_get_attr(py, "tables"), "intervals")
  dtype <- reticulate::py_get_item(py$summary, key)$dtype
  cast <- tryCatch(reticulate::py_get_item(frame, key)$astype(dtype), error = function(e) NULL)
  if (!is.null(cast)) { # (DataFrame.assign: pandas' __setitem__ reads a caller's frame)
    frame <- do.call(frame$assign, stats::setNames(list(cast), key))
  }
  out <- r_table(frame)
  out[[key]] <- r_ids(out[[key]], ids)
  out$parameter <- as.character(out$parameter)
  out$n_boot <- as.integer(out$n_boot)
  out
}

# The attribute "bootstrap" of a fit: list(refits =, level =), or NULL.
bootstrap_attr <- function(py, how) {
  if (is.null(how$bootstrap) || !py_has_table(py, "intervals")) {
    return(NULL)
  }
  list(refits = as.integer(how$bootstrap), level = as.double(how$bootstrap_level))
}

# "90% intervals, 100 refits" (what print() says of the intervals table).
bootstrap_text <- function(fit) {
  b <- attr(fit, "bootstrap")
  if (is.null(b)) {
    return("bootstrap intervals")
  }
  sprintf("%s%% bootstrap intervals, %d refit%s", format(100 * b$level, digits = 6),
          b$refits, if (b$refits == 1L) "" else "s")
}

mixture_sample <- function(fit, dataset = NULL, n = 1, seed = NULL) {
  check_fit_class(fit, "bulkem_fit", "fit_mixture")
  id <- fitted_dataset(fit, dataset)
  n <- py_int(n, "n")
  if (n < 1L) {
    stop("`n` must be >= 1 (how many values to draw), got ", n, ".", call. = FALSE)
  }
  seed <- py_int(r_seed(seed), "seed")
  py <- fit_result_python(fit)
  out <- py_call(py$sample, python_dataset_id(fit, id), n = n, seed = seed,
                 .terms = list(ids = attr(fit, "ids"), interface = "fit_mixture"))
  values <- py_matrix(reticulate::py_get_item(out, 0L))
  component <- as.integer(py_numbers(reticulate::py_get_item(out, 1L)))
  frame <- if (ncol(values) == 1L) {
    data.frame(value = values[, 1L])
  } else {
    stats::setNames(as.data.frame(values), paste0("value_", seq_len(ncol(values))))
  }
  frame$component <- component
  frame
}
