# A grid of sizes: fit_mixture(components = 1:4), fit_hmm(components = 2:4),
# fit_ssm(order = 1:3), fit_tmap(orders = list(c(1, 2), c(1, 1, 2))). Python
# (bulkem.fit with a list of sizes) fits every size from the same seed and
# chooses each dataset's size by `criterion`; the fit's tables hold the chosen
# size's rows, its `selection` table one row per (dataset, size), and
# fit_size() gives the ordinary fit of any one size.
#
# A grid fit has the attribute "grid": list(label =, arg =, sizes =,
# criterion =, how =), where label is Python's name of the size
# ("n_components", "order" or "orders", the size column of the tables), arg
# the R argument's name, sizes the grid (an integer vector, or a list of
# integer vectors of Erlang orders), and how what the fitting function knew
# besides the Python result (dataset ids, sequence labels...), which its
# builder needs again to make the fit of one size (fit_size()). A fit of one
# size has no such attribute.

criteria <- c("bic", "aic", "icl")

# criterion: one of criteria, checked.
check_criterion <- function(criterion) {
  if (!is.character(criterion) || length(criterion) != 1L || is.na(criterion) ||
    !criterion %in% criteria) {
    stop("`criterion` must be \"bic\", \"aic\" or \"icl\" (how a grid of sizes chooses each ",
      "dataset's size), got ", paste(deparse(criterion), collapse = ""), ".",
      call. = FALSE
    )
  }
  criterion
}

# A size argument (components, AR order) -> what bulkem.fit takes: one number
# as a Python int (exactly as before: Python checks its range and says so), or
# several, a grid, as a Python list of ints, checked here.
py_sizes <- function(x, name) {
  if (length(x) == 1L) {
    return(py_int(x, name))
  }
  check_size_grid(x, name)
  reticulate::r_to_py(as.list(as.integer(x)))
}

# A grid of whole numbers >= 1, each once.
check_size_grid <- function(x, name) {
  shown <- paste(deparse(x), collapse = "")
  if (length(x) == 0L) {
    stop("`", name, "` is empty; expected one whole number, or several for a grid of sizes ",
      "(e.g. ", name, " = 1:4).",
      call. = FALSE
    )
  }
  if (!is.numeric(x) || anyNA(x) || any(x != round(x)) || any(abs(x) > .Machine$integer.max)) {
    stop("`", name, "` must be whole numbers (one, or several for a grid of sizes, e.g. ",
      name, " = 1:4), got ", shown, ".",
      call. = FALSE
    )
  }
  if (any(x < 1)) {
    stop("`", name, "` must be >= 1, got ", shown, " (", paste(x[x < 1], collapse = ", "),
      " below 1).",
      call. = FALSE
    )
  }
  if (anyDuplicated(x)) {
    stop("`", name, "` = ", shown, " repeats ", paste(unique(x[duplicated(x)]), collapse = ", "),
      "; give each size of the grid once.",
      call. = FALSE
    )
  }
  invisible(x)
}

# TMAP orders: one vector of Erlang orders (one size), or a list of them (a
# grid; a list of one vector is that one size). Returns list(orders =, grid =):
# the orders checked (an integer vector, or a list of them) and whether they
# are a grid.
check_orders_grid <- function(orders) {
  if (!is.list(orders) || is.data.frame(orders)) {
    return(list(orders = check_orders(orders), grid = FALSE))
  }
  if (length(orders) == 0L) {
    stop("`orders` is an empty list; expected a vector of Erlang orders (e.g. orders = ",
      "c(1, 2, 3)), or a list of them for a grid (e.g. orders = list(c(1, 2), c(1, 2, 3))).",
      call. = FALSE
    )
  }
  checked <- lapply(seq_along(orders), function(k) {
    o <- orders[[k]]
    if (!is.numeric(o) || length(o) == 0L || anyNA(o) || any(o != round(o)) || any(o < 1)) {
      stop("`orders` is a list (a grid of sizes); each element must be a vector of whole ",
        "numbers >= 1, one per Erlang branch, but element ", k, " is ",
        paste(deparse(o), collapse = ""), ". E.g. orders = list(c(1, 2), c(1, 2, 3)).",
        call. = FALSE
      )
    }
    check_orders(o)
  })
  if (length(checked) == 1L) {
    return(list(orders = checked[[1L]], grid = FALSE))
  }
  keys <- vapply(checked, paste, character(1), collapse = ",")
  if (anyDuplicated(keys)) {
    stop("`orders` repeats c(", gsub(",", ", ", keys[duplicated(keys)][1L], fixed = TRUE),
      "); give each size of the grid once.",
      call. = FALSE
    )
  }
  list(orders = checked, grid = TRUE)
}

# Arguments that take one size only, refused with a grid (Python refuses them
# too, in its own terms). name: the R argument holding the grid; bootstrap: the
# refits asked for; maker: the R function called, which the advice names.
check_grid_args <- function(sizes, name, init = NULL, checkpoint = NULL, bootstrap = 0L,
                            maker = "fit_mixture") {
  if (!is.null(init)) {
    stop("`init` with a grid of sizes (", name, " = ", grid_call(sizes), "): starting values ",
      "have one size; fit that size on its own with init = .",
      call. = FALSE
    )
  }
  if (!is.null(checkpoint)) {
    stop("`checkpoint` with a grid of sizes (", name, " = ", grid_call(sizes), "): a grid is ",
      "fitted in memory, its model choice made over the whole call; run one checkpointed ",
      "fit per size.",
      call. = FALSE
    )
  }
  if (bootstrap > 0L) {
    stop("`bootstrap` with a grid of sizes (", name, " = ", grid_call(sizes), "): the ",
      "bootstrap refits one size. Choose the size with the grid fit, then bootstrap that ",
      "size fitted alone: ", maker, "(..., ", name, " = <the size chosen>, bootstrap = ",
      bootstrap, ").",
      call. = FALSE
    )
  }
}

# A grid as R code: 1:4, c(1, 3), list(c(1, 2), c(1, 1, 2)).
grid_call <- function(sizes) {
  if (is.list(sizes)) {
    return(paste0("list(", paste(vapply(sizes, function(o) {
      paste0("c(", paste(o, collapse = ", "), ")")
    }, character(1)), collapse = ", "), ")"))
  }
  if (length(sizes) > 1L && all(diff(sizes) == 1)) {
    return(paste0(sizes[1L], ":", sizes[length(sizes)]))
  }
  size_call(sizes, "")
}

# The grid of a Python result (NULL for a fit of one size); how: what the R
# fitting function knew (its criterion among it).
py_grid <- function(py, how) {
  if (!reticulate::py_has_attr(py, "_size_label")) {
    return(NULL)
  }
  label <- reticulate::py_to_r(reticulate::py_get_attr(py, "_size_label"))
  if (is.null(label)) {
    return(NULL)
  }
  builtins <- reticulate::import_builtins(convert = FALSE)
  sizes <- reticulate::py_to_r(builtins$list(reticulate::py_get_attr(py, "_sizes")))
  sizes <- if (identical(label, "orders")) {
    lapply(sizes, function(s) as.integer(unlist(s)))
  } else {
    as.integer(unlist(sizes))
  }
  list(
    label = label,
    arg = switch(label, n_components = "components", label),
    sizes = sizes,
    criterion = how$criterion,
    how = how
  )
}

# A grid fit's size column (of summary or selection, a pandas column) in R:
# integers (NA where no size was chosen), or Erlang orders as text "1,2,3".
r_size_column <- function(col, label) {
  if (!identical(label, "orders")) {
    return(as.integer(r_column(col)))
  }
  values <- reticulate::py_to_r(col$tolist())
  vapply(values, function(o) {
    if (is.null(o) || length(o) == 0L) NA_character_ else paste(unlist(o), collapse = ",")
  }, character(1))
}

# A size as the tables write it: 3, or "1,2,3" for Erlang orders.
size_key <- function(size, label) {
  if (identical(label, "orders")) paste(size, collapse = ",") else as.character(size)
}

# The grid's sizes: "1-4" (consecutive, increasing) or "1, 3, 5"; orders
# "1,2 or 1,1,2".
grid_text <- function(grid) {
  s <- grid$sizes
  if (is.list(s)) {
    keys <- vapply(s, size_key, character(1), label = "orders")
    return(paste(keys, collapse = " or "))
  }
  if (length(s) > 2L && all(diff(s) == 1L)) {
    return(paste0(s[1L], "-", s[length(s)]))
  }
  paste(s, collapse = ", ")
}

# "components 1-4, chosen by BIC".
grid_heading <- function(grid, word = grid$arg) {
  paste0(word, " ", grid_text(grid), ", chosen by ", toupper(grid$criterion))
}

# The chosen sizes and how many datasets chose each: "1 (2 datasets), 3 (1
# dataset), none (1 dataset)". item: "dataset" or "trace".
chosen_text <- function(fit, item = "dataset") {
  grid <- attr(fit, "grid")
  chosen <- fit$summary[[grid$label]]
  keys <- vapply(grid$sizes, size_key, character(1), label = grid$label)
  counts <- table(factor(as.character(chosen), levels = keys))
  counts <- counts[counts > 0L]
  parts <- sprintf("%s (%d %s%s)", names(counts), as.integer(counts), item,
                   ifelse(counts == 1L, "", "s"))
  n_none <- sum(is.na(chosen))
  if (n_none > 0L) {
    parts <- c(parts, sprintf("none (%d %s%s)", n_none, item, if (n_none == 1L) "" else "s"))
  }
  paste(parts, collapse = ", ")
}

# The grid line of a print() method: which sizes were chosen, for how many.
# word: what the sizes count ("components", "states", "order"...).
print_grid <- function(fit, item = "dataset", word = attr(fit, "grid")$arg) {
  if (!is.null(attr(fit, "grid"))) {
    cat(word, " chosen: ", chosen_text(fit, item), "\n", sep = "")
  }
}

# The columns print() shows of the summary: the size column after the status
# for a grid fit.
print_columns <- function(fit, cols) {
  grid <- attr(fit, "grid")
  if (!is.null(grid)) {
    at <- match("status", cols)
    cols <- append(cols, grid$label, after = at)
  }
  intersect(cols, names(fit$summary))
}

# The makers of each fit class and their builders: the function that makes the
# R fit from a Python result and `how` (see above).
fit_makers <- c(bulkem_fit = "fit_mixture", bulkem_hmm = "fit_hmm",
                bulkem_tmap = "fit_tmap", bulkem_ssm = "fit_ssm")

fit_builder <- function(class) {
  switch(class,
    bulkem_fit = mixture_fit,
    bulkem_hmm = hmm_fit,
    bulkem_tmap = tmap_fit,
    bulkem_ssm = ssm_fit
  )
}

fit_size <- function(fit, size) {
  class <- intersect(class(fit), names(fit_makers))
  if (length(class) == 0L) {
    stop("`fit` must be the result of fit_mixture(), fit_hmm(), fit_tmap() or fit_ssm(), got ",
      "a ", class(fit)[1L], ".",
      call. = FALSE
    )
  }
  class <- class[1L]
  maker <- fit_makers[[class]]
  grid <- attr(fit, "grid")
  if (is.null(grid)) {
    own <- one_size(fit, class)
    if (anyNA(own$size)) { # (a local level: no size)
      stop("This fit is a local-level model, which has no size; fit_size() picks a size of ",
        "a fit over a grid of sizes, such as fit_ssm(..., model = \"ar\", order = 1:3).",
        call. = FALSE
      )
    }
    if (!missing(size) && is_size(size, own$size, own$arg)) {
      return(fit)
    }
    stop("This fit has one size (", own$arg, " = ", size_call(own$size, own$arg), "); ",
      "fit_size() picks a size of a fit over a grid of sizes, such as ", maker, "(..., ",
      own$arg, " = ", own$example, ").",
      call. = FALSE
    )
  }
  if (missing(size)) {
    stop("`size` is missing: say which ", grid$arg, " to take, one of ", grid_text(grid), ".",
      call. = FALSE
    )
  }
  k <- match_size(size, grid)
  size <- grid$sizes[[k]]
  py <- attr(fit, "python")
  if (is.null(py) || reticulate::py_is_null_xptr(py)) {
    stop("fit_size() needs the fit's Python object, which holds every size's fits; it is ",
      "gone (the fit was saved and read back, or made in another R session). Fit that size ",
      "on its own: ", maker, "(..., ", grid$arg, " = ", size_call(size, grid$arg),
      ", seed = ", format(attr(fit, "seed"), scientific = FALSE), ") gives the same fits.",
      call. = FALSE
    )
  }
  py_size <- if (identical(grid$label, "orders")) reticulate::tuple(as.list(size)) else size
  one <- py_call(py$for_size, py_size, .terms = list(ids = attr(fit, "ids"), interface = maker))
  how <- grid$how
  if (grid$label %in% c("order", "orders")) {
    how[[grid$label]] <- size # (what the fit of that size records)
  }
  out <- fit_builder(class)(one, how)
  key <- if (identical(class, "bulkem_tmap")) "trace" else "dataset"
  if (nrow(out$summary) != nrow(fit$summary)) { # (fit: some datasets of a grid fit, fit[i])
    out <- out[fit$summary[[key]]]
  }
  out
}

# A size as R code: 3, or c(1, 2, 3) for Erlang orders (arg "orders").
size_call <- function(size, arg) {
  if (identical(arg, "orders") || length(size) != 1L) {
    return(paste0("c(", paste(size, collapse = ", "), ")"))
  }
  format(size, scientific = FALSE)
}

# What size a fit of one size has: list(arg =, size =, example =).
one_size <- function(fit, class) {
  switch(class,
    bulkem_tmap = list(arg = "orders", size = attr(fit, "orders"),
                       example = "list(c(1, 2), c(1, 2, 3))"),
    bulkem_ssm = list(arg = "order", size = attr(fit, "order"), example = "1:3"),
    list(arg = "components", size = attr(fit, "n_components"), example = "1:4")
  )
}

# Whether `size` (as fit_size() takes it) is `own`, the size of a fit of one size.
is_size <- function(size, own, arg) {
  orders <- identical(arg, "orders")
  grid <- list(label = if (orders) "orders" else arg, arg = arg,
               sizes = if (orders) list(own) else own)
  !is.na(size_position(size, grid))
}

# The position of `size` in a grid (NA when it is not there).
size_position <- function(size, grid) {
  keys <- vapply(grid$sizes, size_key, character(1), label = grid$label)
  key <- if (is.list(grid$sizes)) {
    if (is.list(size) && length(size) == 1L) size <- size[[1L]]
    if (is.character(size) && length(size) == 1L && !is.na(size)) {
      gsub("[[:space:]]", "", size)
    } else if (is.numeric(size) && length(size) > 0L && !anyNA(size)) {
      paste(format(size, scientific = FALSE, trim = TRUE), collapse = ",")
    } else {
      NA_character_
    }
  } else if (is.numeric(size) && length(size) == 1L && !is.na(size)) {
    format(size, scientific = FALSE, trim = TRUE)
  } else {
    NA_character_
  }
  match(key, keys)
}

# The position of `size` in a grid; an error saying the grid when it is not there.
match_size <- function(size, grid) {
  k <- size_position(size, grid)
  if (is.na(k)) {
    choices <- if (is.list(grid$sizes)) {
      paste0(paste(vapply(grid$sizes, size_call, character(1), arg = "orders"),
                   collapse = " or "),
             " (or as text, \"", size_key(grid$sizes[[1L]], "orders"),
             "\", as in fit$selection$orders)")
    } else {
      paste(grid$sizes, collapse = ", ")
    }
    stop("`size` must be one of the grid's ", grid$arg, ": ", choices, "; got ",
      paste(deparse(size), collapse = ""), ".",
      call. = FALSE
    )
  }
  k
}
