# The log-likelihood of many datasets at given parameters, without fitting:
# loglik_at() (bulkem.loglik in Python), for every family of the fit_*()
# functions, its data in the R forms of that family's fit_*() function.

loglik_at <- function(data, family = "invgauss", params, n_components = NULL,
                      backend = "auto", dtype = "float64", ...) {
  one_string(family, "family")
  covariance_type <- check_covariance_type(list(...)[["covariance_type"]], family)
  if (missing(params) || is.null(params)) {
    stop("`params` is missing; expected the parameters as a named list (",
      loglik_blocks(family, covariance_type),
      ") for every dataset, or a list of such lists, one per dataset.",
      call. = FALSE
    )
  }
  one_string(backend, "backend")
  one_string(dtype, "dtype")
  n_components <- py_int(n_components, "n_components", null_ok = TRUE)
  opts <- list(...)
  if (length(opts) && (is.null(names(opts)) || any(!nzchar(names(opts))))) {
    stop("Arguments in `...` are the family's options and column names (e.g. emission = ",
      "\"categorical\", orders = c(1, 2, 3), order = 2, dataset_col = \"id\") and must be ",
      "named; got ", if (is.null(names(opts))) length(opts) else sum(!nzchar(names(opts))),
      " without a name.",
      call. = FALSE
    )
  }
  # An option of `...` (removed from those passed on as they are), or its default.
  take <- function(name, default) {
    value <- opts[[name]]
    opts[[name]] <<- NULL
    if (is.null(value)) default else value
  }
  take("covariance_type", NULL) # (checked above, passed below)
  module <- bulkem_module()
  family_args <- list() # the family's options and columns, as Python takes them
  scalars <- character() # blocks that are one number
  word <- NULL # what the messages call a dataset's parts ("sequence k", ...)
  if (identical(family, "hmm")) {
    emission <- take("emission", "categorical") # fit_hmm()'s default
    one_string(emission, "emission")
    dataset_col <- take("dataset_col", "dataset")
    sequence_col <- take("sequence_col", "sequence")
    value_col <- take("value_col", "value")
    one_string(dataset_col, "dataset_col")
    one_string(sequence_col, "sequence_col")
    check_value_col(value_col, "emission = \"gaussian\"")
    n_symbols <- take("n_symbols", NULL)
    coded <- if (identical(emission, "categorical")) {
      factor_symbols(data, value_col)
    } else {
      list(data = data, levels = NULL)
    }
    data <- coded$data
    if (is.null(n_symbols) && !is.null(coded$levels)) {
      n_symbols <- length(coded$levels)
    }
    batch <- py_hmm_batch(data, identical(emission, "gaussian"), dataset_col, sequence_col,
                          value_col)
    family_args <- list(emission = emission, sequence_col = sequence_col,
                        dataset_col = dataset_col, value_col = py_value_col(value_col))
    if (!is.null(n_symbols)) {
      family_args$n_symbols <- py_int(n_symbols, "n_symbols")
    }
    terms <- list(ids = batch$ids, interface = "fit_hmm", args = character(), init = "params")
    word <- "sequence"
  } else if (identical(family, "tmap")) {
    trace_col <- take("trace_col", "trace")
    run_col <- take("run_col", "run")
    value_col <- take("value_col", "value")
    one_string(trace_col, "trace_col")
    one_string(run_col, "run_col")
    one_string(value_col, "value_col")
    orders <- take("orders", NULL)
    batch <- py_tmap_batch(data, trace_col, run_col, value_col)
    family_args <- list(dataset_col = batch$trace_col, run_col = run_col, value_col = value_col)
    if (!is.null(orders)) {
      family_args$orders <- reticulate::tuple(as.list(check_orders(orders)))
    }
    terms <- list(ids = batch$ids, interface = "fit_tmap",
                  args = c(dataset_col = "trace_col"), init = "params")
    word <- "run"
  } else if (family %in% c("ar", "local_level")) {
    dataset_col <- take("dataset_col", "dataset")
    series_col <- take("series_col", "series")
    value_col <- take("value_col", "value")
    one_string(dataset_col, "dataset_col")
    one_string(series_col, "series_col")
    one_string(value_col, "value_col")
    order <- take("order", NULL)
    batch <- py_hmm_batch(data, FALSE, dataset_col, series_col, value_col)
    family_args <- list(series_col = series_col, dataset_col = dataset_col,
                        value_col = value_col)
    if (!is.null(order)) {
      family_args$order <- py_int(order, "order")
    }
    terms <- list(ids = batch$ids, interface = "fit_ssm", args = character(), init = "params")
    scalars <- c("level0", "state_var", "obs_var") # shape () in Python's layouts
    word <- "series"
  } else { # a mixture, or a name Python refuses with the list of families
    dataset_col <- take("dataset_col", "dataset")
    value_col <- take("value_col", "value")
    one_string(dataset_col, "dataset_col")
    check_value_col(value_col, "family = \"gaussian\"")
    batch <- py_datasets(data, dataset_col, value_col, matrices = identical(family, "gaussian"))
    family_args <- list(dataset_col = dataset_col, value_col = py_value_col(value_col))
    if (!is.null(covariance_type) && !identical(covariance_type, "diag")) {
      family_args$covariance_type <- covariance_type
    }
    terms <- list(ids = batch$ids, interface = "fit_mixture", args = character(),
                  init = "params")
  }
  data_names <- if (identical(batch$ids, "name")) names(data) else NULL
  py_params <- py_loglik_params(params, family, data_names, scalars, covariance_type)
  args <- c(
    list(module$loglik, batch$py, family = family, params = py_params,
         n_components = n_components, backend = backend, dtype = dtype),
    family_args,
    py_options(opts), # the rest (Python refuses what its family does not take)
    list(.terms = terms)
  )
  out <- do.call(py_call, args)
  table <- r_table(out)
  table$dataset <- r_ids(table$dataset, batch$ids)
  table$n_obs <- as.integer(table$n_obs)
  if (!is.null(word)) { # "sequence k" (k from 0 within a dataset) -> its label or k + 1
    table$message <- relabel_sequences(table$message, batch$labels, word = word)
  }
  table
}

# --- helpers -------------------------------------------------------------------------------------

# The parameter blocks of a family (and, for a Gaussian one, covariance type), for the
# messages.
loglik_blocks <- function(family, covariance_type = NULL) {
  blocks <- switch(family,
    invgauss = "weight, mu and lambda, vectors of one value per component",
    gaussian = switch(if (is.null(covariance_type)) "diag" else covariance_type,
      full = paste0("weight, a vector of one value per component, mean, a components x ",
                    "dimensions matrix, and cov, the covariance matrices: a components x ",
                    "D(D+1)/2 matrix of their lower triangles row by row (as the columns ",
                    "cov_1_1, cov_2_1, cov_2_2, ...) or a list of the components' D x D ",
                    "matrices"),
      tied = paste0("weight, a vector of one value per component, mean, a components x ",
                    "dimensions matrix, and cov, as for covariance_type = \"full\" with ",
                    "the same matrix for every component"),
      spherical = paste0("weight and var, vectors of one value per component, and mean, a ",
                         "components x dimensions matrix"),
      paste0("weight, a vector of one value per component, and mean and var, ",
             "components x dimensions matrices")
    ),
    poisson = "weight and rate, vectors of one value per component",
    negbinom = paste0("weight, size and mu (dnbinom()'s), vectors of one value per ",
                      "component"),
    lognormal = paste0("weight, meanlog and varlog (the mean and variance of log x), vectors ",
                       "of one value per component"),
    gamma = "weight, shape and rate, vectors of one value per component",
    hmm = paste0("startprob, transmat and the emission's emissionprob (categorical), means ",
                 "and vars (gaussian) or lambdas (poisson), in hmmlearn's shapes as ",
                 "hmm_params() returns them"),
    tmap = "alpha, pi and rates, as tmap_params() returns them",
    ar = "phi, a vector of the order's coefficients, and state_var and obs_var, one number each",
    local_level = "level0, state_var and obs_var, one number each",
    NULL
  )
  if (is.null(blocks)) "the family's parameter blocks" else
    paste0("for family = \"", family, "\": ", blocks)
}

# value_col: one column name, or several where `several` (a Gaussian) allows.
check_value_col <- function(value_col, several) {
  if (!is.character(value_col) || length(value_col) < 1L || anyNA(value_col)) {
    stop("`value_col` must name one column (or, for ", several, ", several), got ",
      paste(deparse(value_col), collapse = ""), ".",
      call. = FALSE
    )
  }
}

py_value_col <- function(value_col) {
  if (length(value_col) == 1L) value_col else as.list(value_col)
}

# params of loglik_at() -> what bulkem.loglik takes: one named list of blocks
# (a dict) or a list of them, one per dataset (a list of dicts, in the order of
# the datasets; named after the datasets when `data` is a named list).
py_loglik_params <- function(params, family, data_names, scalars, covariance_type = NULL) {
  form <- paste0(
    "`params` must be a named list of parameter blocks (", loglik_blocks(family, covariance_type),
    "), or a list of such lists, one per dataset"
  )
  # full covariance matrices given as a list of D x D matrices -> Python's layout
  full_cov <- function(p, arg) {
    cov <- if (is.list(p) && !is.data.frame(p) && !is.null(names(p))) p[["cov"]]
    if (isTRUE(covariance_type %in% c("full", "tied")) && is.list(cov) &&
      !is.data.frame(cov)) {
      p[["cov"]] <- py_cov_block(cov, paste0(arg, "$cov"))
    }
    p
  }
  one_set <- is.list(params) && !is.data.frame(params) &&
    !all(vapply(params, function(p) is.list(p) && !is.data.frame(p), logical(1)))
  if (one_set) { # (one parameter set for every dataset: its blocks are not all lists)
    params <- full_cov(params, "params")
  }
  if (is.data.frame(params) || !is.list(params) || length(params) == 0L) {
    found <- if (is.data.frame(params)) {
      "a data.frame"
    } else if (is.list(params)) {
      "an empty list"
    } else {
      paste0("a ", class(params)[1L], " (", paste(utils::head(deparse(params), 1L),
                                                   collapse = ""), ")")
    }
    stop(form, "; got ", found, ".", call. = FALSE)
  }
  is_set <- vapply(params, function(p) is.list(p) && !is.data.frame(p), logical(1))
  if (!any(is_set)) { # one parameter set for every dataset
    if (is.null(names(params)) || any(!nzchar(names(params)))) {
      stop(form, "; got a list of ", length(params), " element", if (length(params) > 1L) "s",
        " with ", if (is.null(names(params))) "no names" else "some names empty", ".",
        call. = FALSE
      )
    }
    return(py_named_arrays(params, paste0(form, "."), arg = "params", scalars = scalars))
  }
  if (!all(is_set)) {
    stop(form, "; got a list that mixes lists (elements ",
      paste(utils::head(which(is_set), 5L), collapse = ", "), ") and other values (elements ",
      paste(utils::head(which(!is_set), 5L), collapse = ", "), ").",
      call. = FALSE
    )
  }
  labels <- names(params)
  if (!is.null(labels)) {
    if (is.null(data_names)) {
      stop("`params` is a named list of parameter sets (", paste(utils::head(labels, 5L),
        collapse = ", "), if (length(labels) > 5L) ", ...", "), but the datasets are not a ",
        "named list, so the names cannot be matched; give params unnamed, one set per ",
        "dataset in the order of the datasets (the rows of the result).",
        call. = FALSE
      )
    }
    if (!setequal(labels, data_names) || anyDuplicated(labels) ||
      length(labels) != length(data_names)) {
      stop("`params` names its parameter sets ", paste(utils::head(labels, 5L), collapse = ", "),
        if (length(labels) > 5L) ", ...", "; expected one set for each dataset of data: ",
        paste(utils::head(data_names, 5L), collapse = ", "),
        if (length(data_names) > 5L) ", ...", ".",
        call. = FALSE
      )
    }
    params <- params[data_names]
  }
  shown <- if (is.null(names(params))) seq_along(params) else sprintf("\"%s\"", names(params))
  sets <- Map(function(p, label) {
    arg <- paste0("params[[", label, "]]")
    py_named_arrays(full_cov(p, arg), paste0(form, "; ", arg, " is not a named list."),
                    arg = arg, scalars = scalars)
  }, unname(params), shown)
  reticulate::r_to_py(unname(sets))
}
