expect_same_table <- function(r, py, shift = character(), skip_cols = character()) {
  py_names <- unlist(reticulate::py_to_r(py$columns$tolist()))
  expect_identical(names(r), py_names)
  expect_equal(nrow(r), reticulate::py_len(py))
  for (name in setdiff(py_names, skip_cols)) {
    expected <- py_col(py, name)
    if (name %in% shift) {
      expected <- expected + 1L
    }
    actual <- r[[name]]
    if (is.numeric(expected)) {
      expect_equal(as.double(actual), as.double(expected), tolerance = 1e-12, info = name)
    } else {
      expect_identical(actual, expected, info = name)
    }
  }
}

test_that("fit_mixture() gives the tables of the Python call on the same data and seed", {
  skip_if_no_bulkem()
  data <- demo_data()
  fit <- fit_mixture(data$r, starts = 3, max_iter = 50, seed = 42, backend = "cpu")
  py <- py_bulkem()$fit(data$py,
    n_starts = 3L, max_iter = 50L, seed = 42L, backend = "cpu",
    progress = FALSE
  )
  expect_s3_class(fit, "bulkem_fit")
  expect_named(fit, c("summary", "components", "starts", "start_values"))
  for (tab in names(fit)) expect_s3_class(fit[[tab]], "data.frame")
  # dataset positions and start numbers count from 1 in R
  expect_same_table(fit$summary, py$summary, shift = c("dataset", "best_start"))
  expect_same_table(fit$components, py$components, shift = "dataset")
  expect_same_table(fit$starts, py$starts, shift = c("dataset", "start"))
  expect_same_table(fit$start_values, py$start_values, shift = c("dataset", "start"))
  expect_identical(fit$summary$dataset, 1:3)
  expect_type(fit$summary$n_obs, "integer")
  expect_type(fit$summary$converged, "logical")
  expect_equal(attr(fit, "seed"), 42)
  expect_equal(attr(fit, "backend"), "cpu")
  expect_equal(attr(fit, "n_components"), 2L)
  expect_output(print(fit), "bulkem fit: invgauss mixture, 2 components, 3 datasets")
})

test_that("named lists and long data.frames keep their dataset names", {
  skip_if_no_bulkem()
  data <- demo_data(2L, 200L, 5L)
  named <- stats::setNames(data$r, c("first", "second"))
  fit <- fit_mixture(named, starts = 2, max_iter = 30, seed = 3, backend = "cpu")
  expect_identical(fit$summary$dataset, c("first", "second"))
  expect_identical(unique(fit$components$dataset), c("first", "second"))
  long <- data.frame(
    dataset = rep(c("first", "second"), each = 200),
    value = unlist(data$r)
  )
  fit_long <- fit_mixture(long, starts = 2, max_iter = 30, seed = 3, backend = "cpu")
  expect_equal(fit_long$summary, fit$summary)
  expect_equal(fit_long$components, fit$components)
  # the Python call on a dict gives the same numbers
  py <- py_bulkem()$fit(reticulate::py_dict(c("first", "second"), list(
    reticulate::py_get_item(data$py, 0L), reticulate::py_get_item(data$py, 1L)
  )), n_starts = 2L, max_iter = 30L, seed = 3L, backend = "cpu", progress = FALSE)
  expect_same_table(fit$components, py$components)
  expect_same_table(fit$starts, py$starts, shift = "start")
  # one vector is one dataset
  one <- fit_mixture(data$r[[1]], starts = 2, max_iter = 30, seed = 3, backend = "cpu")
  expect_identical(one$summary$dataset, 1L)
  expect_equal(one$summary$loglik, fit$summary$loglik[1])
})

test_that("user starting values are the first starts", {
  skip_if_no_bulkem()
  data <- demo_data(1L, 300L, 9L)
  init <- list(
    weight = rbind(c(0.5, 0.5), c(0.3, 0.7)),
    mu = rbind(c(0.99, 1.01), c(1, 3)),
    lambda = rbind(c(1, 1), c(30, 0.2))
  )
  fit <- fit_mixture(data$r, starts = 3, seed = 1, backend = "cpu", init = init)
  sv <- fit$start_values
  expect_equal(sv$mu[sv$start == 1], c(0.99, 1.01))
  expect_equal(sv$lambda[sv$start == 2], c(30, 0.2))
  expect_equal(sv$weight[sv$start == 2], c(0.3, 0.7))
  one <- fit_mixture(data$r, starts = 1, seed = 1, backend = "cpu",
    init = list(weight = c(0.5, 0.5), mu = c(0.99, 1.01), lambda = c(1, 1)))
  expect_equal(one$start_values$mu, c(0.99, 1.01))
})

test_that("mixture_density() equals the inverse-Gaussian mixture from statmod", {
  skip_if_no_bulkem()
  skip_if_not_installed("statmod")
  data <- demo_data(2L, 300L, 4L)
  fit <- fit_mixture(data$r, starts = 2, seed = 8, backend = "cpu")
  x <- c(0.05, 0.5, 1, 2, 5, 10)
  for (id in 1:2) {
    comp <- fit$components[fit$components$dataset == id, ]
    expected <- Reduce(`+`, lapply(seq_len(nrow(comp)), function(j) {
      comp$weight[j] * statmod::dinvgauss(x, mean = comp$mu[j], shape = comp$lambda[j])
    }))
    expect_equal(mixture_density(fit, id, x), expected, tolerance = 1e-10)
  }
  expect_error(mixture_density(list(), 1, x), "must be the result of fit_mixture")
})

test_that("set.seed() makes a fit with seed = NULL reproducible", {
  skip_if_no_bulkem()
  data <- demo_data(2L, 200L, 6L)
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  set.seed(42)
  a <- quiet(fit_mixture(data$r, starts = 3, backend = "cpu"))
  set.seed(42)
  b <- quiet(fit_mixture(data$r, starts = 3, backend = "cpu"))
  expect_identical(attr(a, "seed"), attr(b, "seed"))
  expect_identical(a$start_values, b$start_values)
  expect_identical(a$components, b$components)
  set.seed(43)
  c <- quiet(fit_mixture(data$r, starts = 3, backend = "cpu"))
  expect_false(identical(attr(c, "seed"), attr(a, "seed")))
  # the original interface too
  set.seed(7)
  o1 <- quiet(bulkem(data$r, random.inits = 2, use.gpu = FALSE))
  set.seed(7)
  o2 <- quiet(bulkem(data$r, random.inits = 2, use.gpu = FALSE))
  expect_identical(o1, o2)
  # and the seed drawn is one of R's random numbers: the stream moved on
  set.seed(42)
  first <- stats::runif(1)
  set.seed(42)
  quiet(fit_mixture(data$r[1], starts = 1, backend = "cpu"))
  expect_false(identical(stats::runif(1), first))
})

test_that("fits stopped at max_iter give one warning per call, with their count", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 300L, 11L)
  n_warnings <- 0L
  fit <- withCallingHandlers(
    fit_mixture(data$r, starts = 2, max_iter = 2, tol = 0, seed = 1, backend = "cpu"),
    warning = function(w) {
      n_warnings <<- n_warnings + 1L
      expect_s3_class(w, "bulkem_not_converged")
      expect_match(conditionMessage(w), paste0(
        "3 of 3 fits did not converge: they stopped at max_iter = 2 with the log-likelihood ",
        "still changing by more than tol = 0. Increase max_iter, or see fit$summary$status."
      ), fixed = TRUE)
      invokeRestart("muffleWarning")
    }
  )
  expect_equal(n_warnings, 1L)
  expect_true(all(fit$summary$status == "max_iter"))
  expect_warning(
    bulkem(data$r[1], max.iters = 2, epsilon = 0, use.gpu = FALSE, seed = 1),
    "1 of 1 fit did not converge: it stopped at max.iters = 2", fixed = TRUE
  )
  expect_no_warning(fit_mixture(data$r[1], starts = 2, max_iter = 1000, seed = 1,
                                backend = "cpu"))
})

test_that("multi-dimensional Gaussian mixtures: matrices, value_col vectors, reg_covar, init_method", {
  skip_if_no_bulkem()
  # three clusters, three components: the size (M = 3, D = 2) of a kernel the Python
  # tests compile, so that this test compiles none of its own
  set.seed(5)
  draw <- function(n) {
    z <- findInterval(stats::runif(n), c(0.35, 0.7)) + 1L
    cbind(x1 = stats::rnorm(n, c(0, 4, 8)[z]), x2 = stats::rnorm(n, c(0, -3, 2)[z], 0.5))
  }
  m1 <- draw(150)
  m2 <- draw(120)
  fit <- fit_mixture(list(m1, m2), family = "gaussian", components = 3, starts = 3, seed = 2,
                     max_iter = 500, backend = "cpu")
  expect_identical(attr(fit, "n_dims"), 2L)
  expect_true(all(c("mean_1", "mean_2", "var_1", "var_2") %in% names(fit$components)))
  expect_equal(fit$summary$n_obs, c(150L, 120L))
  # the same as Python on the same arrays
  py <- py_bulkem()$fit(list(bulkem:::py_hmm_array(m1), bulkem:::py_hmm_array(m2)),
    family = "gaussian", n_components = 3L, n_starts = 3L, seed = 2L, max_iter = 500L,
    backend = "cpu", progress = FALSE)
  expect_equal(fit$summary$loglik, py_col(py$summary, "loglik"), tolerance = 1e-12)
  # a long data.frame with value_col naming the columns; other columns are not values
  long <- data.frame(id = rep(c("a", "b"), c(150, 120)), rbind(m1, m2), note = 1)
  byname <- fit_mixture(long, family = "gaussian", dataset_col = "id",
                        value_col = c("x1", "x2"), components = 3, starts = 3, seed = 2,
                        max_iter = 500, backend = "cpu")
  expect_identical(byname$summary$dataset, c("a", "b"))
  expect_equal(byname$summary$loglik, fit$summary$loglik, tolerance = 1e-10)
  # reg_covar and init_method reach Python
  sub <- suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(list(m1), family = "gaussian", components = 3, starts = 2, seed = 2,
                backend = "cpu", init_method = "subset", reg_covar = 0.5))
  expect_true(all(sub$components$var_1 >= 0.5))
  expect_error(fit_mixture(list(m1), family = "gaussian", init_method = "nope"),
               "unknown init_method \"nope\"")
  # densities and classes with a matrix of points
  pts <- rbind(c(0, 0), c(4, -3))
  p <- predict(fit, pts, dataset = 1)
  expect_identical(p$classification, c(1L, 2L))
  z_py <- bulkem:::py_matrix(attr(fit, "python")$predict_proba(0L, bulkem:::py_hmm_array(pts)))
  expect_equal(unname(p$z), z_py, tolerance = 1e-10)
  d_py <- bulkem:::py_numbers(attr(fit, "python")$density(0L, bulkem:::py_hmm_array(pts)))
  expect_equal(mixture_density(fit, 1, pts), d_py, tolerance = 1e-10)
  expect_error(mixture_density(fit, 1, c(0, 1)), "this fit has 2 dimensions")
  expect_error(plot(fit), "plot() draws one-dimensional mixtures", fixed = TRUE)
  # several value columns for a one-dimensional family: refused, with what to do
  expect_error(fit_mixture(long, dataset_col = "id", value_col = c("x1", "x2")),
               "only family = \"gaussian\" fits several dimensions", fixed = TRUE)
  expect_error(fit_mixture(list(m1)), "pass family = \"gaussian\"", fixed = TRUE)
})

test_that("fit_mixture() refuses the families it does not serve, saying what does", {
  expect_error(fit_mixture(list(1:5), family = "hmm"), "fitted by fit_hmm(data, components",
               fixed = TRUE)
  expect_error(fit_mixture(list(1:5), family = "tmap"),
               "fitted by fit_tmap(data, orders = c(1, 2, 3))", fixed = TRUE)
  for (family in c("ar", "local_level")) {
    expect_error(fit_mixture(list(1:5), family = family),
                 paste0("fitted by fit_ssm(data, model = \"", family, "\")"), fixed = TRUE)
  }
})
