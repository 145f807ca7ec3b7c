# What a fit keeps on the R side so that it keeps working after saveRDS() and
# readRDS(), in this or a new R session, where its Python object is gone.
#
# Besides its tables, a fit keeps (attribute "saved"):
#   - each fitted dataset's best parameters exactly as Python holds them (one
#     row of `params` per dataset, Python's layout) and what makes its model
#     (family, components, dimensions, the family's options): enough to make
#     the Python result again, for the methods that need Python (decoding,
#     scoring and sampling new data, moments, smoothing);
#   - the fitted values of every dataset, as Python fitted them, when they
#     are at most getOption("bulkem.keep_values", 1e6) numbers: for fitted(),
#     residuals() and plot(), which need a dataset's own values.
# The Python result made again holds those best fits only (no tables, no
# data); it is made once per R session and fit (cached by `token`).

# The most values a fit keeps for the methods that need its data.
keep_values_limit <- function() {
  n <- getOption("bulkem.keep_values", 1e6)
  if (!is.numeric(n) || length(n) != 1L || is.na(n) || n < 0) {
    stop("option bulkem.keep_values must be one number >= 0 (the most values a fit keeps ",
      "for fitted(), residuals() and plot() after saveRDS()), got ",
      paste(deparse(n), collapse = ""), ".",
      call. = FALSE
    )
  }
  n
}

# A Python function: what of a FitResult the R side keeps (see above). A grid
# fit (bulkem.fit with a list of sizes) keeps, for each size, the fits of the
# datasets that chose it (and the values once).
keep_helper <- function() {
  if (is.null(.state$keep)) {
    code <- paste(
      "def keep(res, limit):",
      "    import numpy as np",
      "    from bulkem.scale import combine",
      "    def plain(k):",
      "        return k.item() if isinstance(k, np.generic) else k",
      "    def best(part, only):",
      "        ids = [k for k in part._best if only is None or k in only]",
      "        rows = [np.asarray(part._best[k][0], dtype=np.float64).ravel() for k in ids]",
      "        params = np.stack(rows) if rows else np.zeros((0, 0))",
      "        return {'result_class': combine.class_name(type(part)),",
      "                'ids': [plain(k) for k in ids], 'n_params': int(params.shape[1]),",
      "                'params': bytearray(np.ascontiguousarray(params, '<f8').tobytes()),",
      "                'family': part.family, 'n_components': int(part.n_components),",
      "                'n_dims': int(part.n_dims), 'dtype': str(part.dtype),",
      "                'seed': str(part.seed), 'backend': str(part.backend)}",
      "    if getattr(res, '_sizes', None):",
      "        out = {'label': res._size_label, 'sizes': [",
      "            dict(best(part, {k for k, c in res._chosen.items() if c == size}),",
      "                 size=[int(r) for r in size] if isinstance(size, tuple) else [int(size)])",
      "            for size, part in res._sizes.items()]}",
      "    else:",
      "        out = best(res, None)",
      "    out['values'] = None",
      "    packed = res._packed",
      "    if packed is not None and limit >= 0 and packed.values.size <= limit:",
      "        v = np.ascontiguousarray(packed.values, '<f8')",
      "        out.update(values=bytearray(v.tobytes()), n_values=int(v.size),",
      "                   width=1 if v.ndim == 1 else int(v.shape[1]),",
      "                   offsets=[int(o) for o in packed.offsets],",
      "                   value_ids=[plain(packed.ids[i]) for i in packed.valid])",
      "    return out",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$keep <- reticulate::py_get_item(env, "keep")
  }
  .state$keep
}

# A Python function: a FitResult made again from what keep() kept.
rebuild_helper <- function() {
  if (is.null(.state$rebuild)) {
    code <- paste(
      "def rebuild(spec, ids, params):",
      "    import numpy as np, pandas as pd",
      "    from bulkem.scale import combine",
      "    name = family = spec['family']",
      "    opts = dict(spec['options'] or {})",
      "    if family in ('gaussian_full', 'gaussian_tied', 'gaussian_spherical'):",
      "        family, opts['covariance_type'] = 'gaussian', family.split('_', 1)[1]",
      "    if 'orders' in opts:",
      "        o = opts['orders']",
      "        opts['orders'] = tuple(int(r) for r in (o if isinstance(o, (list, tuple)) else [o]))",
      "    D = int(spec['n_dims'])",
      "    # a tiny input of the fitted shape: the model depends on the options and",
      "    # the data's dimensions only (and, for symbols counted from the data, on K)",
      "    if family == 'gaussian':",
      "        sample = [np.ones((3, D))]",
      "    elif family == 'hmm':",
      "        em = opts.get('emission', 'gaussian')",
      "        if em == 'gaussian':",
      "            seq = np.zeros((2, D))",
      "        elif em == 'categorical':",
      "            seq = np.arange(int(spec['n_symbols']), dtype=np.float64)",
      "        else:",
      "            seq = np.zeros(2)",
      "        sample = [[seq]]",
      "    elif family == 'tmap':",
      "        sample = [[np.ones(2)]]",
      "    elif family in ('ar', 'local_level'):",
      "        sample = [np.zeros(3)]",
      "    else:",
      "        sample = [np.ones(3)]",
      "    kwargs = {'family': family, 'n_components': int(spec['n_components']), **opts}",
      "    model = combine.model_for(kwargs, sample)",
      "    ids = list(ids)",
      "    P = np.frombuffer(bytes(params), dtype='<f8')",
      "    P = P.reshape(len(ids), -1) if ids else np.zeros((0, 0))",
      "    best = {k: (P[i].copy(), P[i].copy()) for i, k in enumerate(ids)}",
      "    key = 'trace' if family == 'tmap' else 'dataset'",
      "    summary = pd.DataFrame({key: pd.Series(ids, dtype=object),",
      "                            'status': ['converged'] * len(ids)})",
      "    empty = pd.DataFrame()",
      "    cls = combine.load_class(spec['result_class'])",
      "    return cls(summary, empty, empty, empty, spec['backend'], int(spec['seed']), name,",
      "               int(spec['n_components']), spec['dtype'], 0.0, n_dims=D, tables={},",
      "               _model=model, _best=best)",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$rebuild <- reticulate::py_get_item(env, "rebuild")
  }
  .state$rebuild
}

# A Python function: a grid fit made again from its sizes' results made again
# (each holding the fits of the datasets that chose it; sizes: a list of
# lists, [k] or the Erlang orders): each dataset's methods run by its size's.
regrid_helper <- function() {
  if (is.null(.state$regrid)) {
    code <- paste(
      "def regrid(parts, sizes, label):",
      "    import dataclasses",
      "    keys = [tuple(int(r) for r in s) if label == 'orders' else int(s[0]) for s in sizes]",
      "    chosen = {k: key for part, key in zip(parts, keys) for k in part._best}",
      "    best = {k: v for part in parts for k, v in part._best.items()}",
      "    return dataclasses.replace(parts[0], _best=best, _sizes=dict(zip(keys, parts)),",
      "                               _chosen=chosen, _size_label=label)",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$regrid <- reticulate::py_get_item(env, "regrid")
  }
  .state$regrid
}

# Python bytes (a bytearray) of little-endian float64 -> an R numeric vector.
py_doubles <- function(b, n) {
  readBin(reticulate::py_to_r(b), "double", n = n, size = 8L, endian = "little")
}

# What an R fit keeps of its Python result `py` (the attribute "saved").
# options: the family's options that make its model (emission, params,
# n_symbols for an HMM; orders, drop_bad_runs for a TMAP; order for AR).
# values: FALSE to keep no data (a TMAP's methods need none). A grid fit keeps
# list(label =, sizes =, values =, token =): in `sizes`, for each size that
# datasets chose, their fits as a fit of that size keeps them, and the `size`.
saved_state <- function(py, options = list(), values = TRUE, n_symbols = NA_integer_) {
  limit <- if (isTRUE(values)) keep_values_limit() else -1
  k <- reticulate::py_call(keep_helper(), py, as.double(limit))
  get <- function(key) reticulate::py_to_r(reticulate::py_get_item(k, key))
  label <- reticulate::py_to_r(k$get("label")) # (a grid fit's)
  out <- if (is.null(label)) {
    saved_params(k, options, n_symbols)
  } else {
    parts <- reticulate::py_get_item(k, "sizes")
    sizes <- lapply(seq_len(reticulate::py_len(parts)) - 1L, function(i) {
      part <- reticulate::py_get_item(parts, i)
      size <- as.integer(unlist(reticulate::py_to_r(reticulate::py_get_item(part, "size"))))
      opts <- options
      if (label %in% c("order", "orders")) {
        opts[[label]] <- size
      }
      c(saved_params(part, opts, n_symbols), list(size = size))
    })
    used <- vapply(sizes, function(p) length(p$ids) > 0L, logical(1))
    # (sizes that no dataset chose are left out; when none was chosen, the first stays)
    list(label = label, sizes = if (any(used)) sizes[used] else sizes[1L])
  }
  out["values"] <- list(NULL)
  out$token <- paste(c(format(Sys.time(), "%Y%m%d%H%M%OS6"), Sys.getpid(),
                       sprintf("%08x", sample_token())), collapse = "-")
  if (!is.null(get("values"))) {
    out$values <- list(
      ids = unlist(get("value_ids")),
      offsets = as.double(unlist(get("offsets"))),
      width = as.integer(get("width")),
      x = py_doubles(reticulate::py_get_item(k, "values"), get("n_values"))
    )
  }
  out
}

# The best parameters of a keep() answer (one size's) and what makes their model.
saved_params <- function(k, options, n_symbols) {
  get <- function(key) reticulate::py_to_r(reticulate::py_get_item(k, key))
  ids <- unlist(get("ids"))
  n_params <- get("n_params")
  params <- py_doubles(reticulate::py_get_item(k, "params"), length(ids) * n_params)
  list(
    result_class = get("result_class"),
    family = get("family"),
    n_components = as.integer(get("n_components")),
    n_dims = as.integer(get("n_dims")),
    n_symbols = as.integer(n_symbols),
    dtype = get("dtype"),
    seed = get("seed"), # (text: seeds beyond R's integers)
    backend = get("backend"),
    options = options,
    ids = if (is.null(ids)) integer(0) else ids,
    params = matrix(params, nrow = length(ids), ncol = n_params, byrow = TRUE)
  )
}

# A number for a fit's token that does not touch R's random numbers (which
# set.seed() users rely on): a counter of this session.
sample_token <- function() {
  .state$tokens <- if (is.null(.state$tokens)) 1L else .state$tokens + 1L
  .state$tokens
}

# The Python result of a fit: its own while this R session holds it, else one
# made again from what the fit keeps (after saveRDS() and readRDS()).
fit_result_python <- function(fit) {
  py <- attr(fit, "python")
  if (!is.null(py) && !reticulate::py_is_null_xptr(py)) {
    return(py)
  }
  saved <- attr(fit, "saved")
  if (is.null(saved)) {
    stop("This needs the fit's Python object, which is gone (the fit was saved and read ",
      "back, or made in another R session), and the fit keeps no parameters to make it ",
      "again (it was made by an older version of the bulkem R package): fit again.",
      call. = FALSE
    )
  }
  bulkem_module() # (an R error saying how to set Python up, when it is not)
  if (!is.null(.state$rebuilt) && identical(.state$rebuilt$token, saved$token) &&
    !reticulate::py_is_null_xptr(.state$rebuilt$py)) {
    return(.state$rebuilt$py)
  }
  py <- if (is.null(saved$sizes)) {
    rebuild_result(saved)
  } else { # a grid fit: each size's result; each dataset's methods run by its size's
    parts <- lapply(saved$sizes, rebuild_result)
    sizes <- lapply(saved$sizes, function(p) as.list(p$size))
    regrid <- regrid_helper()
    py_call(function(...) reticulate::py_call(regrid, ...), reticulate::r_to_py(parts),
            reticulate::r_to_py(sizes), saved$label)
  }
  .state$rebuilt <- list(token = saved$token, py = py)
  py
}

# The Python result of one size made again from what saved_params() kept.
rebuild_result <- function(saved) {
  spec <- reticulate::py_dict(
    c("result_class", "family", "n_components", "n_dims", "n_symbols", "dtype", "seed",
      "backend", "options"),
    list(saved$result_class, saved$family, saved$n_components, saved$n_dims,
         if (is.na(saved$n_symbols)) 0L else saved$n_symbols, saved$dtype,
         reticulate::import_builtins(convert = FALSE)$int(saved$seed), saved$backend,
         if (length(saved$options)) reticulate::py_dict(names(saved$options),
           unname(lapply(saved$options, function(v) if (length(v) > 1L) as.list(v) else v)))
         else NULL)
  )
  params <- reticulate::import_builtins(convert = FALSE)$bytearray(
    reticulate::r_to_py(writeBin(as.double(t(saved$params)), raw(), endian = "little")))
  rebuild <- rebuild_helper()
  py_call(function(...) reticulate::py_call(rebuild, ...), spec,
          reticulate::r_to_py(as.list(saved$ids)), params)
}

# A fitted dataset's values as they were fitted (a matrix with a row per value
# when a value has several numbers), from what the fit keeps, else from its
# Python result. `what` names the function that needs them, for the message.
fit_values <- function(fit, id, what) {
  kept <- attr(fit, "saved")$values
  pyid <- python_dataset_id(fit, id)
  if (!is.null(kept)) {
    k <- match(as.character(pyid), as.character(kept$ids))
    if (!is.na(k)) {
      rows <- seq.int(kept$offsets[k] + 1, kept$offsets[k + 1L])
      if (kept$width == 1L) {
        return(kept$x[rows])
      }
      m <- matrix(kept$x, ncol = kept$width, byrow = TRUE)
      return(m[rows, , drop = FALSE])
    }
  }
  py <- attr(fit, "python")
  packed <- !is.null(py) && !reticulate::py_is_null_xptr(py) &&
    !inherits(reticulate::py_get_attr(py, "_packed"), "python.builtin.NoneType")
  if (!packed) {
    why <- if (is.null(attr(fit, "checkpoint"))) {
      paste0("the fit keeps no values (it held more than getOption(\"bulkem.keep_values\", ",
             "1e6) of them) and its Python object is gone (saved and read back)")
    } else {
      "a fit read back from a checkpoint holds no values"
    }
    stop(what, " needs the dataset's values: ", why, ". ", values_advice(fit), call. = FALSE)
  }
  plotting <- reticulate::import("bulkem.result.plotting", convert = FALSE)
  values <- py_call(plotting$dataset_values, py, pyid, .terms = list(ids = attr(fit, "ids")))
  if (length(py_shape(values)) > 1L) py_matrix(values) else py_numbers(values)
}

values_advice <- function(fit) {
  if (inherits(fit, "bulkem_fit")) {
    "Pass them to predict(fit, values, dataset = ...) instead."
  } else if (inherits(fit, "bulkem_ssm")) {
    "Pass a series to ssm_smooth(fit, dataset, series = values) instead."
  } else {
    "Pass them to hmm_decode(fit, dataset, sequences) instead."
  }
}
