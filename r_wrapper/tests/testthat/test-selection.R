# A grid of sizes: fit_mixture(components = 1:3), fit_ssm(order = 1:2) and
# fit_tmap(orders = list(...)) against bulkem.fit with a list of sizes in
# Python, fit_size() against fits of one size, and the methods of a grid fit.
# Small data; the sizes are those the other tests compile (invgauss 1-3 share
# one CPU kernel in a grid, AR orders 1 and 2, TMAP orders 1, 2, 3 and 1, 1, 2).

quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")

# One grid fit of three small datasets, made once for the tests of this file.
grid_cache <- new.env()
mixture_grid <- function() {
  if (is.null(grid_cache$fit)) {
    data <- demo_data(3L, 100L, 21L)
    grid_cache$data <- data
    grid_cache$fit <- quiet(fit_mixture(data$r, components = 1:3, starts = 3, seed = 5,
                                        backend = "cpu"))
  }
  grid_cache
}

selection_columns <- c("dataset", "n_components", "status", "loglik", "n_params", "aic", "bic",
                       "icl", "n_iter", "n_best", "chosen")

test_that("a grid of components gives Python's selection and each dataset's chosen fit", {
  skip_if_no_bulkem()
  g <- mixture_grid()
  fit <- g$fit
  py <- py_bulkem()$fit(g$data$py, n_components = list(1L, 2L, 3L), n_starts = 3L, seed = 5L,
                        backend = "cpu", progress = FALSE)
  expect_s3_class(fit, "bulkem_fit")
  expect_named(fit, c("summary", "components", "starts", "start_values", "selection"))
  sel <- fit$selection
  expect_named(sel, selection_columns)
  expect_identical(nrow(sel), 9L)
  expect_identical(sel$dataset, rep(1:3, each = 3L)) # from 1, as every table's
  expect_identical(sel$n_components, rep(1:3, times = 3L))
  expect_type(sel$n_params, "integer")
  expect_type(sel$chosen, "logical")
  expect_identical(sel$n_params, rep(c(2L, 5L, 8L), times = 3L))
  py_sel <- py$selection
  for (col in setdiff(selection_columns, c("dataset", "chosen", "status", "n_components"))) {
    expect_equal(as.double(sel[[col]]), as.double(py_col(py_sel, col)), tolerance = 1e-12,
                 info = col)
  }
  expect_identical(sel$status, py_col(py_sel, "status"))
  expect_identical(sel$chosen, py_col(py_sel, "chosen"))
  # one size chosen per dataset, Python's, the smallest BIC
  expect_identical(as.vector(tapply(sel$chosen, sel$dataset, sum)), c(1L, 1L, 1L))
  chosen <- sel[sel$chosen, ]
  expect_identical(fit$summary$n_components, chosen$n_components)
  expect_identical(fit$summary$n_components, as.integer(py_col(py$summary, "n_components")))
  expect_identical(chosen$n_components,
                   as.vector(tapply(sel$bic, sel$dataset, which.min), "integer"))
  expect_identical(names(fit$summary)[match("loglik", names(fit$summary)) - 1L], "n_components")
  # the summary and components of the chosen size, as Python's tables
  expect_equal(fit$summary$loglik, chosen$loglik)
  expect_equal(fit$summary$bic, chosen$bic)
  expect_equal(fit$components$mu, py_col(py$components, "mu"), tolerance = 1e-12)
  expect_identical(fit$components$dataset, as.integer(py_col(py$components, "dataset") + 1L))
  expect_identical(as.vector(table(fit$components$dataset), "integer"), chosen$n_components)
  expect_identical(fit$starts$dataset, rep(1:3, each = 3L))
  expect_identical(attr(fit, "n_components"), 1:3)
  expect_identical(attr(fit, "grid")$criterion, "bic")
})

test_that("fit_size() gives the fit of one size, as a fit of that size alone", {
  skip_if_no_bulkem()
  g <- mixture_grid()
  fit <- g$fit
  tables <- c("summary", "components", "starts", "start_values")
  for (k in 1:3) {
    one <- fit_size(fit, k)
    alone <- quiet(fit_mixture(g$data$r, components = k, starts = 3, seed = 5,
                               backend = "cpu"))
    expect_s3_class(one, "bulkem_fit")
    expect_named(one, tables)
    expect_null(attr(one, "grid"))
    expect_identical(attr(one, "n_components"), k)
    expect_equal(unclass(one)[tables], unclass(alone)[tables], tolerance = 1e-12, info = k)
    # the chosen size's rows of the grid fit are that size's
    ds <- fit$summary$dataset[fit$summary$n_components == k]
    expect_equal(fit$components[fit$components$dataset %in% ds, ],
                 one$components[one$components$dataset %in% ds, ], ignore_attr = TRUE)
    expect_equal(fit$selection$loglik[fit$selection$n_components == k], one$summary$loglik)
  }
  # some datasets of a grid fit: that size's fit of them
  part <- fit_size(fit[c(3, 1)], 2)
  expect_identical(part$summary$dataset, c(3L, 1L))
  expect_equal(part$summary$loglik, fit_size(fit, 2)$summary$loglik[c(3, 1)])
  # a fit of one size is its own size
  alone <- fit_size(fit, 2)
  expect_identical(fit_size(alone, 2), alone)
  expect_error(fit_size(alone, 3), paste0(
    "This fit has one size (components = 2); fit_size() picks a size of a fit over a grid of ",
    "sizes, such as fit_mixture(..., components = 1:4)."), fixed = TRUE)
  expect_error(fit_size(fit, 4),
               "`size` must be one of the grid's components: 1, 2, 3; got 4.", fixed = TRUE)
  expect_error(fit_size(fit), "`size` is missing: say which components to take, one of 1-3.",
               fixed = TRUE)
  expect_error(fit_size(list(1), 2), "`fit` must be the result of fit_mixture(), fit_hmm(), ",
               fixed = TRUE)
})

test_that("the methods of a grid fit work on each dataset's chosen size", {
  skip_if_no_bulkem()
  g <- mixture_grid()
  fit <- g$fit
  k <- fit$summary$n_components
  expect_output(print(fit), "bulkem fit: invgauss mixture, components 1-3, chosen by BIC, 3 datasets")
  expect_output(print(fit), "components chosen: ")
  expect_output(print(fit), "$selection (every size)", fixed = TRUE)
  expect_output(print(summary(fit)), "components 1-3, chosen by BIC")
  expect_output(print(summary(fit)), "\\(chosen by BIC\\), [0-9]+ free parameters")
  ll <- logLik(fit)
  expect_identical(attr(ll, "df"), fit$selection$n_params[fit$selection$chosen])
  expect_equal(AIC(fit), fit$summary$aic, tolerance = 1e-12)
  expect_equal(BIC(fit), fit$summary$bic, tolerance = 1e-12)
  expect_output(print(ll), paste0("\\(df = ", paste(attr(ll, "df"), collapse = ", "), "\\)"))
  cf <- coef(fit)
  expect_identical(dim(cf), c(3L, 3L * max(k)))
  expect_identical(sum(!is.na(cf[, startsWith(colnames(cf), "mu[")])), sum(k))
  # predict() and the density of a dataset are those of its chosen size's fit
  x <- c(0.3, 1, 2.5)
  for (d in 1:3) {
    one <- fit_size(fit, k[d])
    expect_equal(predict(fit, x, dataset = d), predict(one, x, dataset = d))
    expect_equal(mixture_density(fit, d, x), mixture_density(one, d, x))
    expect_identical(ncol(fitted(fit, d, type = "prob")), k[d])
  }
  png <- tempfile(fileext = ".png")
  grDevices::png(png)
  plot(fit, which.max(k)) # the chosen size's components
  grDevices::dev.off()
  expect_gt(file.size(png), 2000)
  unlink(png)
  # `[` and as.data.frame keep the selection table
  sub <- fit[2]
  expect_identical(sub$selection$dataset, c(2L, 2L, 2L))
  expect_identical(as.data.frame(fit, table = "selection"), fit$selection)
  # another criterion: the smallest AIC
  aic <- quiet(fit_mixture(g$data$r, components = 1:3, starts = 3, seed = 5, backend = "cpu",
                           criterion = "aic"))
  expect_identical(aic$summary$n_components,
                   as.vector(tapply(aic$selection$aic, aic$selection$dataset, which.min),
                             "integer"))
  expect_equal(aic$selection[, 1:10], fit$selection[, 1:10]) # the same fits, chosen otherwise
  expect_output(print(aic), "chosen by AIC")
})

test_that("grid arguments are checked, with messages in R's terms", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 4, 5))
  expect_error(fit_mixture(x, components = c(1, 1)),
               "`components` = c(1, 1) repeats 1; give each size of the grid once.", fixed = TRUE)
  expect_error(fit_mixture(x, components = c(0, 1, 2)),
               "`components` must be >= 1, got c(0, 1, 2) (0 below 1).", fixed = TRUE)
  expect_error(fit_mixture(x, components = 0), # one size: Python's message, as before
               "components must be >= 1; got components = 0.", fixed = TRUE)
  expect_error(fit_mixture(x, components = c(1, 2.5)),
               "`components` must be whole numbers (one, or several for a grid of sizes, e.g. ",
               fixed = TRUE)
  expect_error(fit_mixture(x, components = c(1, NA)), "got c(1, NA).", fixed = TRUE)
  expect_error(fit_mixture(x, components = integer(0)), "`components` is empty", fixed = TRUE)
  expect_error(fit_mixture(x, components = 1:2, criterion = "BIC"),
               "`criterion` must be \"bic\", \"aic\" or \"icl\"", fixed = TRUE)
  expect_error(fit_mixture(x, components = 1:2, init = list(weight = 1, mu = 1, lambda = 1)),
               "`init` with a grid of sizes (components = 1:2): starting values have one size",
               fixed = TRUE)
  expect_error(fit_mixture(x, components = 1:2, checkpoint = tempfile()),
               "`checkpoint` with a grid of sizes (components = 1:2)", fixed = TRUE)
  expect_error(bulkem(x, num.components = 1:2),
               "`num.components` must be one whole number, got 1:2.", fixed = TRUE)
  expect_error(fit_hmm(list(c(0, 1, 1)), c(2, 2)),
               "`components` = c(2, 2) repeats 2", fixed = TRUE)
  expect_error(fit_ssm(list(c(0.1, 0.2, 0.3)), order = c(1, 0)),
               "`order` must be >= 1, got c(1, 0) (0 below 1).", fixed = TRUE)
  runs <- list(list(c(0.5, 1), 0.3))
  expect_error(fit_tmap(runs, orders = list(c(1, 2), c(1, 2))),
               "`orders` repeats c(1, 2); give each size of the grid once.", fixed = TRUE)
  expect_error(fit_tmap(runs, orders = list(c(1, 2), c(1, 0))),
               "each element must be a vector of whole numbers >= 1, one per Erlang branch, but element 2 is c(1, 0).",
               fixed = TRUE)
  expect_error(fit_tmap(runs, orders = list()), "`orders` is an empty list", fixed = TRUE)
  expect_error(fit_tmap(runs, orders = list(1, 2), criterion = "icl", backend = "cpu"),
               "criterion = \"icl\" needs the posterior probabilities of a mixture or HMM",
               fixed = TRUE)
})

test_that("fit_ssm(order = 1:2) and fit_tmap(orders = list(...)) fit grids too", {
  skip_if_no_bulkem()
  set.seed(4)
  series <- list(a = ar1_noise(80), b = list(ar1_noise(60), ar1_noise(50)))
  ar <- quiet(fit_ssm(series, "ar", order = 1:2, starts = 2, max_iter = 30, seed = 3,
                      backend = "cpu"))
  expect_named(ar, c("summary", "components", "starts", "start_values", "selection"))
  expect_named(ar$selection, c("dataset", "order", "status", "loglik", "n_params", "aic",
                               "bic", "n_iter", "n_best", "chosen"))
  expect_identical(ar$selection$order, c(1L, 2L, 1L, 2L))
  expect_identical(ar$summary$order, ar$selection$order[ar$selection$chosen])
  expect_output(print(ar), "AR(p) plus noise, p = 1, 2, chosen by BIC, 2 datasets", fixed = TRUE)
  for (p in 1:2) {
    alone <- quiet(fit_ssm(series, "ar", order = p, starts = 2, max_iter = 30, seed = 3,
                           backend = "cpu"))
    one <- fit_size(ar, p)
    expect_identical(attr(one, "order"), p)
    expect_equal(one$components, alone$components, tolerance = 1e-12)
    expect_output(print(one), sprintf("AR(%d) plus noise", p), fixed = TRUE)
  }
  # each dataset's smoothing by its chosen order
  k <- ar$summary$order[2]
  expect_equal(ssm_smooth(ar, "b", 2), ssm_smooth(fit_size(ar, k), "b", 2))
  expect_identical(sum(startsWith(colnames(coef(ar)), "phi_")), max(ar$summary$order))

  set.seed(5)
  runs <- function(n) lapply(seq_len(n), function(i) stats::rexp(1 + i %% 4))
  traces <- list(t1 = runs(15), t2 = runs(12))
  # (orders 1,2,3 and 1,1,2: the sizes of the TMAP kernels the Python tests compile)
  grid <- list(c(1, 2, 3), c(1, 1, 2))
  tm <- quiet(fit_tmap(traces, orders = grid, starts = 2, max_iter = 10, seed = 3,
                       backend = "cpu"))
  py <- py_bulkem()$fit(reticulate::py_dict(c("t1", "t2"), list(
    lapply(traces$t1, bulkem:::py_float_array), lapply(traces$t2, bulkem:::py_float_array))),
    family = "tmap", orders = list(reticulate::tuple(1L, 2L, 3L), reticulate::tuple(1L, 1L, 2L)),
    n_starts = 2L, max_iter = 10L, seed = 3L, backend = "cpu", progress = FALSE)
  sel <- tm$selection
  expect_named(sel, c("trace", "orders", "status", "loglik", "n_params", "aic", "bic",
                      "n_iter", "n_best", "chosen"))
  expect_identical(sel$trace, rep(c("t1", "t2"), each = 2L))
  expect_identical(sel$orders, rep(c("1,2,3", "1,1,2"), 2L)) # orders as text
  expect_equal(sel$loglik, py_col(py$selection, "loglik"), tolerance = 1e-12)
  expect_identical(sel$chosen, py_col(py$selection, "chosen"))
  expect_identical(tm$summary$orders, sel$orders[sel$chosen])
  expect_identical(attr(tm, "orders"), list(1:3, c(1L, 1L, 2L)))
  expect_output(print(tm), "Erlang branch orders 1,2,3 or 1,1,2, chosen by BIC, 2 traces")
  expect_output(print(tm), "orders chosen: ")
  for (o in grid) {
    alone <- quiet(fit_tmap(traces, orders = o, starts = 2, max_iter = 10, seed = 3,
                            backend = "cpu"))
    one <- fit_size(tm, o)
    expect_identical(attr(one, "orders"), as.integer(o))
    expect_equal(one$transitions, alone$transitions, tolerance = 1e-12)
    expect_equal(tmap_moments(one), tmap_moments(alone), tolerance = 1e-12)
  }
  expect_identical(fit_size(tm, "1,1,2")$summary, fit_size(tm, c(1, 1, 2))$summary)
  expect_error(fit_size(tm, c(1, 2)), paste0(
    "`size` must be one of the grid's orders: c(1, 2, 3) or c(1, 1, 2) (or as text, \"1,2,3\", ",
    "as in fit$selection$orders); got c(1, 2)."), fixed = TRUE)
  # each trace's parameters and moments by its chosen orders
  for (id in c("t1", "t2")) {
    one <- fit_size(tm, tm$summary$orders[tm$summary$trace == id])
    expect_equal(tmap_params(tm, id), tmap_params(one, id))
    expect_equal(tmap_moments(tm, id), tmap_moments(one, id))
  }
})

test_that("a grid fit keeps its chosen fits through saveRDS(); fit_size() says to fit again", {
  skip_if_no_bulkem()
  g <- mixture_grid()
  set.seed(4)
  series <- list(a = ar1_noise(80), b = list(ar1_noise(60), ar1_noise(50)))
  fits <- list(
    mix = g$fit,
    se = quiet(fit_mixture(g$data$r[1:2], components = 1:2, starts = 2, seed = 1,
                           backend = "cpu", se = TRUE)),
    ar = quiet(fit_ssm(series, "ar", order = 1:2, starts = 2, max_iter = 30, seed = 3,
                       backend = "cpu"))
  )
  # se = TRUE: each dataset's covariances of its chosen size
  se <- fits$se
  for (d in 1:2) {
    expect_equal(vcov(se, d), vcov(fit_size(se, se$summary$n_components[d]), d))
  }
  expect_identical(names(attr(se[2], "vcov")), "2")
  results <- function(f) {
    list(
      print = utils::capture.output(print(f$mix)),
      predict = predict(f$mix, c(0.5, 1, 2), dataset = 3),
      fitted = fitted(f$mix),
      vcov = vcov(f$se, 2),
      smooth = ssm_smooth(f$ar, "b", 2),
      score = ssm_score(f$ar, "a", c(0.1, -0.2, 0.4)),
      fit_size = tryCatch(fit_size(f$mix, 2)$summary, error = conditionMessage)
    )
  }
  live <- results(fits)
  expect_s3_class(live$fit_size, "data.frame")
  dir <- tempfile("grid")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  saveRDS(fits, file.path(dir, "fits.rds"))
  out <- run_new_session(c(
    "library(bulkem)",
    paste("results <-", paste(deparse(results), collapse = "\n")),
    sprintf("fits <- readRDS('%s')", file.path(dir, "fits.rds")),
    sprintf("saveRDS(results(fits), '%s')", file.path(dir, "back.rds")),
    "cat('GRID RESULTS OK\\n')"
  ))
  expect_true(any(out == "GRID RESULTS OK"), info = paste(out, collapse = "\n"))
  back <- readRDS(file.path(dir, "back.rds"))
  for (name in setdiff(names(live), "fit_size")) {
    expect_identical(back[[name]], live[[name]], info = name)
  }
  expect_identical(back$fit_size, paste0(
    "fit_size() needs the fit's Python object, which holds every size's fits; it is gone (the ",
    "fit was saved and read back, or made in another R session). Fit that size on its own: ",
    "fit_mixture(..., components = 2, seed = 5) gives the same fits."))
})
