# R's standard methods for fits (logLik, AIC/BIC through it, nobs, coef,
# summary, predict, as.data.frame, `[` by dataset). They read the fit's R
# tables only, never the Python object, so a fit saved with saveRDS() and read
# back in a new session keeps working.

# The families whose densities the R side computes from the components table.
mixture_families <- c("invgauss", "gaussian", "poisson", "negbinom", "lognormal", "gamma")

# Free parameters of one dataset's model, from the summary (aic = -2 loglik + 2 df).
# each = TRUE: one per dataset (NA where none was fitted), as for a grid fit,
# whose datasets have the sizes chosen for them.
fit_df <- function(summary, each = FALSE) {
  ok <- is.finite(summary$aic) & is.finite(summary$loglik)
  if (isTRUE(each)) {
    return(ifelse(ok, as.integer(round((summary$aic + 2 * summary$loglik) / 2)), NA_integer_))
  }
  if (!any(ok)) {
    return(NA_integer_)
  }
  as.integer(round((summary$aic[ok][1L] + 2 * summary$loglik[ok][1L]) / 2))
}

# The free parameters of each dataset's model: one number, or (grid fit) one per dataset.
object_df <- function(object) {
  fit_df(object$summary, each = !is.null(attr(object, "grid")))
}

logLik.bulkem_fit <- function(object, ...) {
  s <- object$summary
  grid <- !is.null(attr(object, "grid"))
  structure(s$loglik, df = object_df(object), nobs = s$n_obs,
            class = c(if (grid) "bulkem_logLik", "logLik"))
}

# A grid fit's log-likelihoods, whose degrees of freedom differ by dataset
# (print.logLik() would write them run together).
print.bulkem_logLik <- function(x, digits = getOption("digits"), ...) {
  cat("'log Lik.' ", paste(format(c(x), digits = digits), collapse = ", "),
      " (df = ", paste(format(attr(x, "df"), trim = TRUE), collapse = ", "), ")\n", sep = "")
  invisible(x)
}

logLik.bulkem_hmm <- logLik.bulkem_fit

nobs.bulkem_fit <- function(object, ...) object$summary$n_obs

nobs.bulkem_hmm <- nobs.bulkem_fit

# The parameter columns of the components table (all but the keys and the
# standard errors, se_<parameter>, of a fit with se = TRUE).
param_columns <- function(components) {
  cols <- setdiff(names(components), c("dataset", "component", "state"))
  cols[!startsWith(cols, "se_")]
}

coef.bulkem_fit <- function(object, ...) {
  s <- object$summary
  comp <- object$components
  m <- if (is.null(attr(object, "grid"))) {
    attr(object, "n_components")
  } else { # each dataset its chosen size: columns for the largest, NA beyond a dataset's own
    max(c(0L, comp$component))
  }
  cols <- param_columns(comp)
  out <- matrix(NA_real_, nrow(s), length(cols) * m,
    dimnames = list(as.character(s$dataset),
                    paste0(rep(cols, each = m), "[", rep(seq_len(m), length(cols)), "]"))
  )
  row <- match(as.character(comp$dataset), as.character(s$dataset))
  for (k in seq_along(cols)) {
    out[cbind(row, (k - 1L) * m + comp$component)] <- comp[[cols[k]]]
  }
  out
}

summary.bulkem_fit <- function(object, ...) {
  s <- object$summary
  grid <- attr(object, "grid")
  fits <- s[, c("dataset", if (!is.null(grid)) grid$label, "n_obs", "status", "loglik", "n_iter",
                "aic", "bic")]
  if (!is.null(grid)) {
    fits$df <- fit_df(s, each = TRUE) # (of each dataset's chosen size)
  }
  structure(
    list(
      family = attr(object, "family"),
      covariance_type = fit_family(object)$covariance_type,
      n_components = attr(object, "n_components"),
      n_dims = if (is.null(attr(object, "n_dims"))) 1L else attr(object, "n_dims"),
      backend = attr(object, "backend"),
      seed = attr(object, "seed"),
      df = object_df(object),
      grid = if (!is.null(grid)) grid[c("label", "arg", "sizes", "criterion")],
      status = table(factor(s$status,
        levels = unique(c("converged", "max_iter", "failed", "invalid_data", s$status))
      )),
      fits = fits,
      components = object$components,
      intervals = object$intervals, # (a fit with bootstrap = B)
      bootstrap = attr(object, "bootstrap")
    ),
    class = "summary.bulkem_fit"
  )
}

print.summary.bulkem_fit <- function(x, max_datasets = 5L, digits = 4L, ...) {
  n <- nrow(x$fits)
  size <- if (is.null(x$grid)) {
    sprintf("%d components", x$n_components)
  } else {
    grid_heading(x$grid)
  }
  cat(sprintf("bulkem fit: %s mixture%s, %s, %d dataset%s (backend %s, seed %.0f)\n",
    x$family, covariance_text(x$covariance_type), size, n, if (n == 1L) "" else "s",
    x$backend, x$seed))
  if (is.null(x$grid)) {
    cat(sprintf("free parameters per dataset: %s\n", format(x$df)))
  }
  counts <- x$status[x$status > 0L]
  cat("status:", paste(names(counts), counts, collapse = ", "), "\n")
  for (i in seq_len(min(n, max_datasets))) {
    f <- x$fits[i, ]
    cat(sprintf("\nDataset %s: n = %d, %s", format(f$dataset), f$n_obs, f$status))
    if (is.finite(f$loglik)) {
      cat(sprintf(" after %d iterations\n", f$n_iter))
      if (!is.null(x$grid)) {
        cat(sprintf("%d component%s (chosen by %s), %d free parameters\n",
          f[[x$grid$label]], if (f[[x$grid$label]] == 1L) "" else "s",
          toupper(x$grid$criterion), f$df))
      }
      cat(sprintf("log-likelihood %s, AIC %s, BIC %s\n",
        format(f$loglik, digits = digits + 3L), format(f$aic, digits = digits + 3L),
        format(f$bic, digits = digits + 3L)))
      rows <- x$components[as.character(x$components$dataset) == as.character(f$dataset), ,
                           drop = FALSE]
      rows$dataset <- NULL
      print(rows, row.names = FALSE, digits = digits)
      print_intervals(x, f$dataset, digits)
    } else {
      cat(" (no fitted parameters)\n")
    }
  }
  if (n > max_datasets) {
    cat(sprintf("\n... %d more datasets (summary(fit)$fits has them all)\n", n - max_datasets))
  }
  invisible(x)
}

# One dataset's bootstrap intervals, in print.summary.bulkem_fit().
print_intervals <- function(x, dataset, digits) {
  iv <- x$intervals
  if (is.null(iv)) {
    return(invisible())
  }
  rows <- iv[as.character(iv$dataset) == as.character(dataset), , drop = FALSE]
  if (nrow(rows) == 0L) {
    return(invisible())
  }
  level <- if (is.null(x$bootstrap)) "" else paste0(format(100 * x$bootstrap$level, digits = 6),
                                                    "% ")
  cat(sprintf("%sbootstrap intervals (%d usable refit%s):\n", level, rows$n_boot[1L],
              if (rows$n_boot[1L] == 1L) "" else "s"))
  print(rows[, c("parameter", "estimate", "lower", "upper")], row.names = FALSE,
        digits = digits)
  invisible()
}

as.data.frame.bulkem_fit <- function(x, row.names = NULL, optional = FALSE,
                                     table = "summary", ...) {
  tables <- names(unclass(x))
  if (!is.character(table) || length(table) != 1L || !table %in% tables) {
    stop("`table` must be one of ", paste0("\"", tables, "\"", collapse = ", "), ", got ",
      paste(deparse(table), collapse = ""), ".",
      call. = FALSE
    )
  }
  out <- unclass(x)[[table]]
  if (!is.null(row.names)) {
    row.names(out) <- row.names
  }
  out
}

as.data.frame.bulkem_hmm <- as.data.frame.bulkem_fit

# fit[i]: the datasets i (ids as in fit$summary$dataset, or positions for a
# fit whose datasets have names), every table cut to them. A TMAP's tables
# name them in a column "trace".
`[.bulkem_fit` <- function(x, i) {
  s <- x$summary
  key <- if ("dataset" %in% names(s)) "dataset" else "trace"
  ids <- s[[key]]
  if (missing(i)) {
    return(x)
  }
  pos <- if (is.logical(i)) {
    if (length(i) != length(ids)) {
      stop("A logical index must have one value per ", key, " (", length(ids), "), got ",
        length(i), ".",
        call. = FALSE
      )
    }
    which(i)
  } else if (is.numeric(i) && !is.numeric(ids)) {
    if (any(i < 1 | i > length(ids) | i != round(i))) {
      stop(if (key == "trace") "Trace" else "Dataset", " positions must be whole numbers in 1..",
        length(ids), ".", call. = FALSE)
    }
    as.integer(i)
  } else {
    found <- match(as.character(i), as.character(ids))
    if (anyNA(found)) {
      stop("This fit has no ", key, " ", paste(deparse(i[is.na(found)][1L]), collapse = ""),
        "; its ", key, "s are ", paste(utils::head(format(ids), 10L), collapse = ", "),
        if (length(ids) > 10L) ", ..." else "", ".",
        call. = FALSE
      )
    }
    found
  }
  keep <- as.character(ids[pos])
  out <- unclass(x)
  for (name in names(out)) {
    tab <- out[[name]]
    if (identical(name, "summary")) {
      tab <- tab[pos, , drop = FALSE]
    } else {
      rows <- which(as.character(tab[[key]]) %in% keep)
      rows <- rows[order(match(as.character(tab[[key]][rows]), keep))]
      tab <- tab[rows, , drop = FALSE]
    }
    row.names(tab) <- NULL
    out[[name]] <- tab
  }
  attrs <- attributes(x)
  for (a in c("sequence_lengths", "sequence_labels")) {
    if (!is.null(attrs[[a]])) attrs[[a]] <- attrs[[a]][pos]
  }
  if (is.list(attrs$vcov)) { # (grid fit with se = TRUE) a matrix per dataset
    attrs$vcov <- attrs$vcov[names(attrs$vcov) %in% keep]
  } else if (!is.null(attrs$vcov)) { # (fit with se = TRUE) the kept datasets' covariances
    attrs$vcov <- attrs$vcov[, , dimnames(attrs$vcov)[[3L]] %in% keep, drop = FALSE]
  }
  attrs$names <- names(out)
  attributes(out) <- attrs
  out
}

`[.bulkem_hmm` <- `[.bulkem_fit`

predict.bulkem_fit <- function(object, newdata, dataset = NULL, ...) {
  if (missing(newdata)) {
    stop("`newdata` is missing: pass the values to classify (a numeric vector",
      if (identical(fit_family(object)$family, "gaussian")) {
        ", or a matrix with a row per point"
      } else {
        ""
      },
      "), e.g. predict(fit, x, dataset = 1).",
      call. = FALSE
    )
  }
  terms <- log_terms(object, one_dataset(object, dataset), newdata)
  z <- posterior(terms$base, terms$logq)
  colnames(z) <- paste0("component_", seq_len(ncol(z)))
  list(classification = max.col(z, ties.method = "first"), z = z)
}

# The one dataset a method works on: `dataset`, or the fit's only one.
one_dataset <- function(fit, dataset) {
  ids <- fit$summary$dataset
  if (is.null(dataset)) {
    if (length(ids) != 1L) {
      stop("This fit has ", length(ids), " datasets; say which with `dataset = ` ",
        "(one of fit$summary$dataset).",
        call. = FALSE
      )
    }
    return(ids[[1L]])
  }
  if (length(dataset) != 1L) {
    stop("`dataset` must be one dataset id, as in fit$summary$dataset.", call. = FALSE)
  }
  if (!as.character(dataset) %in% as.character(ids)) {
    stop("dataset ", dataset_label(dataset), " has no fit: no such dataset.", call. = FALSE)
  }
  ids[[match(as.character(dataset), as.character(ids))]]
}

dataset_label <- function(id) {
  if (is.character(id) || is.factor(id)) paste0("\"", as.character(id), "\"") else format(id)
}

# One dataset's fitted components, in table order; an error when it has none.
dataset_components <- function(fit, dataset) {
  family <- fit_family(fit)$family
  if (!is.character(family) || length(family) != 1L || !family %in% mixture_families) {
    stop("This works on inverse-Gaussian, Gaussian, Poisson, negative binomial, log-normal ",
      "and gamma mixtures; ",
      "this fit is of family \"",
      family, "\".",
      call. = FALSE
    )
  }
  rows <- fit$components[as.character(fit$components$dataset) == as.character(dataset), ,
                         drop = FALSE]
  if (nrow(rows) == 0L) {
    status <- fit$summary$status[as.character(fit$summary$dataset) == as.character(dataset)]
    stop("dataset ", dataset_label(dataset), " has no fit: its status is \"", status, "\".",
      call. = FALSE
    )
  }
  rows[order(rows$component), , drop = FALSE]
}

# Points as a matrix with a row per point and a column per dimension.
as_points <- function(x, n_dims) {
  if (is.data.frame(x)) {
    x <- as.matrix(x)
  }
  if (!is.numeric(x) && !(is.logical(x) && all(is.na(x)))) {
    stop("The points are ", not_numbers(x), call. = FALSE)
  }
  if (is.matrix(x)) {
    if (ncol(x) != n_dims) {
      stop("The points are a matrix with ", ncol(x), " columns; expected ", n_dims,
        " (one per dimension of the fit).",
        call. = FALSE
      )
    }
    storage.mode(x) <- "double"
    return(x)
  }
  if (n_dims != 1L) {
    stop("The points are a vector; this fit has ", n_dims, " dimensions: pass a matrix ",
      "with a row per point and ", n_dims, " columns.",
      call. = FALSE
    )
  }
  matrix(as.double(x), ncol = 1L)
}

# Each component's log density at each point as base - exp(logq): base holds
# the weight and the normalising term, logq the log of the quadratic term
# (n x M matrices), as FitResult's family does in Python.
log_terms <- function(fit, dataset, x) {
  rows <- dataset_components(fit, dataset)
  kind <- fit_family(fit)
  family <- kind$family
  n_dims <- if (identical(family, "gaussian")) sum(startsWith(names(rows), "mean_")) else 1L
  x <- as_points(x, n_dims)
  n <- nrow(x)
  m <- nrow(rows)
  base <- logq <- matrix(0, n, m)
  if (identical(family, "invgauss")) {
    v <- x[, 1L]
    v[!(v > 0)] <- NA # no density at x <= 0
    for (j in seq_len(m)) {
      mu <- rows$mu[j]
      lam <- rows$lambda[j]
      base[, j] <- log(rows$weight[j]) + 0.5 * (log(lam) - log(2 * pi) - 3 * log(v))
      logq[, j] <- log(lam) + 2 * log(abs(v - mu)) - log(2) - 2 * log(mu) - log(v)
    }
  } else if (identical(family, "poisson")) {
    v <- x[, 1L]
    v[!(is.finite(v) & v >= 0 & v == floor(v))] <- NA # no probability off the counts 0, 1, 2, ...
    pos <- !is.na(v) & v > 0
    safe <- ifelse(pos, v, 1)
    xlogx <- ifelse(pos, v * log(safe), 0)
    for (j in seq_len(m)) {
      rate <- rows$rate[j]
      # base - q = log w + x log(rate) - rate - log x!, with q = rate - x + x log(x / rate)
      # >= 0 written centred (u = (rate - x) / x), as Python's family: accurate where
      # x log(rate) and rate cancel
      base[, j] <- log(rows$weight[j]) + xlogx - v - lgamma(v + 1)
      u <- (rate - v) / safe
      q <- ifelse(pos, safe * (u - log1p(u)), rate)
      q[is.na(v)] <- NA
      logq[, j] <- log(pmax(q, 0))
    }
  } else if (identical(family, "negbinom")) {
    v <- x[, 1L]
    v[!(is.finite(v) & v >= 0 & v == floor(v))] <- NA # no probability off the counts
    for (j in seq_len(m)) {
      # the whole log probability in base (dnbinom()'s), no quadratic term
      base[, j] <- log(rows$weight[j]) + stats::dnbinom(v, size = rows$size[j],
                                                        mu = rows$mu[j], log = TRUE)
      logq[, j] <- ifelse(is.na(v), NA, -Inf)
    }
  } else if (identical(family, "lognormal")) {
    v <- x[, 1L]
    v[!(v > 0)] <- NA # no density at x <= 0
    y <- log(v)
    for (j in seq_len(m)) {
      var <- rows$varlog[j]
      # the Gaussian's of log x, less log x (the Jacobian) in base, as Python's family
      base[, j] <- log(rows$weight[j]) - 0.5 * log(2 * pi * var) - y
      logq[, j] <- 2 * log(abs(y - rows$meanlog[j])) - log(2) - log(var)
    }
  } else if (identical(family, "gamma")) {
    v <- x[, 1L]
    v[!(v > 0)] <- NA # no density at x <= 0
    for (j in seq_len(m)) {
      a <- rows$shape[j]
      b <- rows$rate[j]
      # base - q = log w + a log b - lgamma(a) + (a - 1) log x - b x, with
      # base = log w - lgamma(a) + a log a - a - log x and q = a (u - 1 - log u) >= 0,
      # u = b x / a, centred at the component's mean as Python's family
      base[, j] <- log(rows$weight[j]) - lgamma(a) + a * log(a) - a - log(v)
      u <- b * v / a
      q <- a * ifelse(u >= 0.5, (u - 1) - log1p(u - 1), u - 1 - (log(b / a) + log(v)))
      logq[, j] <- log(pmax(q, 0))
    }
  } else if (isTRUE(kind$covariance_type %in% c("full", "tied"))) { # (tied: each row, one
    # matrix)
    terms <- gaussian_full_terms(rows, x)
    base <- terms$base
    logq <- terms$logq
  } else if (identical(kind$covariance_type, "spherical")) {
    for (j in seq_len(m)) {
      # one variance for every dimension: covariance var I
      var <- rows$var[j]
      q <- numeric(n)
      for (d in seq_len(n_dims)) {
        q <- q + (x[, d] - rows[[paste0("mean_", d)]][j])^2
      }
      base[, j] <- log(rows$weight[j]) - 0.5 * n_dims * log(2 * pi * var)
      logq[, j] <- log(q / var / 2)
    }
  } else { # a diagonal covariance: a variance per dimension, var_1, ..., var_D
    for (j in seq_len(m)) {
      q <- numeric(n)
      b <- log(rows$weight[j])
      for (d in seq_len(n_dims)) {
        var <- rows[[paste0("var_", d)]][j]
        q <- q + (x[, d] - rows[[paste0("mean_", d)]][j])^2 / var
        b <- b - 0.5 * log(2 * pi * var)
      }
      base[, j] <- b
      logq[, j] <- log(q / 2)
    }
  }
  base[is.nan(base)] <- NA
  logq[is.nan(logq)] <- NA
  list(base = base, logq = logq)
}

# The lower triangle of a symmetric matrix row by row (S[1, 1], S[2, 1], S[2, 2],
# S[3, 1], ...): the order of a full-covariance fit's columns cov_1_1, cov_2_1,
# cov_2_2, cov_3_1, ... and of Python's cov blocks.
lower_rows <- function(S) t(S)[upper.tri(S, diag = TRUE)]

# The symmetric D x D matrix of a lower triangle given row by row (lower_rows()'s inverse).
from_lower_rows <- function(v, D) {
  S <- matrix(0, D, D)
  S[upper.tri(S, diag = TRUE)] <- v # (the transpose's upper triangle, column by column)
  S <- t(S)
  S[upper.tri(S)] <- t(S)[upper.tri(S)]
  S
}

# log_terms() of a Gaussian mixture with full covariance matrices (the columns cov_i_j,
# each component's lower triangle row by row): with S = U'U (U = chol(S)),
# base = log w - 1/2 log|2 pi S| and q = 1/2 |U'^-1 (x - mu)|^2. A covariance that is
# not positive definite gives NA (no density), as NaN in Python.
gaussian_full_terms <- function(rows, x) {
  n <- nrow(x)
  D <- ncol(x)
  m <- nrow(rows)
  cols <- unlist(lapply(seq_len(D), function(i) paste0("cov_", i, "_", seq_len(i))))
  base <- logq <- matrix(NA_real_, n, m)
  for (j in seq_len(m)) {
    S <- from_lower_rows(vapply(cols, function(k) as.double(rows[[k]][j]), numeric(1)), D)
    mu <- vapply(seq_len(D), function(d) as.double(rows[[paste0("mean_", d)]][j]), numeric(1))
    U <- if (all(is.finite(S))) tryCatch(chol(S), error = function(e) NULL)
    if (is.null(U)) {
      next
    }
    z <- backsolve(U, t(x) - mu, transpose = TRUE) # D x n: U'^-1 (x - mu)
    base[, j] <- log(rows$weight[j]) - 0.5 * (2 * sum(log(diag(U))) + D * log(2 * pi))
    logq[, j] <- log(colSums(z^2) / 2)
  }
  list(base = base, logq = logq)
}

# Posterior probabilities of the components (rows sum to 1). Where every
# component's density underflows, the limit: the components with the
# smallest quadratic term share the point in proportion to exp(base); where
# the density is undefined everywhere (x <= 0 for the inverse Gaussian, log-normal
# and gamma, a value other than a count 0, 1, 2, ... for the Poisson), equal shares.
posterior <- function(base, logq) {
  lc <- base - exp(logq)
  lc[is.na(lc)] <- -Inf
  top <- apply(lc, 1L, max)
  e <- exp(lc - ifelse(is.finite(top), top, 0))
  for (r in which(!is.finite(top))) {
    lq <- ifelse(is.na(logq[r, ]), Inf, logq[r, ])
    near <- lq == min(lq)
    b <- ifelse(near & !is.na(base[r, ]), base[r, ], -Inf)
    bt <- max(b)
    e[r, ] <- ifelse(near, exp(b - if (is.finite(bt)) bt else 0), 0)
    if (!is.finite(sum(e[r, ])) || sum(e[r, ]) == 0) {
      e[r, ] <- 1
    }
  }
  e / rowSums(e)
}

# The fitted mixture density at each point: sum over components of exp(base - q).
mixture_values <- function(fit, dataset, x) {
  terms <- log_terms(fit, dataset, x)
  lc <- terms$base - exp(terms$logq)
  lc[is.na(lc)] <- -Inf
  rowSums(exp(lc))
}

# fitted(fit): the most probable component of each of a dataset's own values
# (type = "class") or the posterior probabilities (type = "prob", a matrix with
# a row per value), as predict() gives them for those values.
fitted.bulkem_fit <- function(object, dataset = NULL, type = c("class", "prob"), ...) {
  type <- match.arg(type)
  per_dataset(object, dataset, function(id) {
    p <- predict(object, fit_values(object, id, "fitted()"), dataset = id)
    if (identical(type, "class")) p$classification else p$z
  })
}

residuals.bulkem_fit <- function(object, ...) {
  stop("residuals() has no meaning for a mixture: a value is not a fitted value plus an ",
    "error, it is drawn from one of the components. Use fitted(fit, type = \"prob\") for ",
    "each value's posterior probabilities of the components (fitted(fit) for the most ",
    "probable one), or mixture_density() for the fitted density.",
    call. = FALSE
  )
}

# fun(id) for one dataset (`dataset`, or the fit's only one); with several
# datasets and dataset = NULL, a list named by the datasets' ids with fun(id)
# for each, NULL for a dataset without fitted parameters.
per_dataset <- function(fit, dataset, fun) {
  s <- fit$summary
  has_fit <- s$status %in% c("converged", "max_iter")
  if (!is.null(dataset) || nrow(s) == 1L) {
    id <- one_dataset(fit, dataset)
    pos <- match(as.character(id), as.character(s$dataset))
    if (!has_fit[pos]) {
      stop("dataset ", dataset_label(id), " has no fit: its status is \"", s$status[pos],
        "\".",
        call. = FALSE
      )
    }
    return(fun(id))
  }
  out <- lapply(seq_len(nrow(s)), function(i) if (has_fit[i]) fun(s$dataset[[i]]) else NULL)
  names(out) <- as.character(s$dataset)
  out
}

# Each component's weighted density, weight_l f_l(x), at the points x (a
# matrix with a column per component; 0 where a density is undefined): the
# curves plot() draws, from the components table.
component_values <- function(fit, dataset, x) {
  terms <- log_terms(fit, dataset, x)
  lc <- terms$base - exp(terms$logq)
  lc[is.na(lc)] <- -Inf
  exp(lc)
}

# One dataset id (as in fit$summary$dataset) with fitted parameters, checked.
fitted_dataset <- function(fit, dataset) {
  id <- one_dataset(fit, dataset)
  s <- fit$summary
  pos <- match(as.character(id), as.character(s$dataset))
  if (!s$status[pos] %in% c("converged", "max_iter")) {
    stop("dataset ", dataset_label(id), " has no fit: its status is \"", s$status[pos], "\".",
      call. = FALSE
    )
  }
  id
}
