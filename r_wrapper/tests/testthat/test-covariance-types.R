# Gaussian mixtures with full and spherical covariance matrices
# (fit_mixture(family = "gaussian", covariance_type = )): the tables, the
# methods computed in R from the components table (density, predict, fitted,
# coef), loglik_at(), init, and fits saved and read back, each checked against
# the normal density written here by hand (mvtnorm is not needed).

# Two small 3-D datasets of two clusters, the first correlated (R's random numbers).
# Three dimensions and two components: the sizes of the kernels the Python tests
# compile (gaussian_full and gaussian_spherical at M = 2, D = 3), so that these
# tests compile none of their own.
cov_data <- function() {
  set.seed(21)
  draw <- function(n) {
    z <- stats::runif(n) < 0.45
    a <- cbind(stats::rnorm(n), stats::rnorm(n), stats::rnorm(n, 0, 0.8))
    a[, 2] <- 0.8 * a[, 1] + 0.6 * a[, 2] # correlation 0.8 in the first cluster
    b <- cbind(stats::rnorm(n, 4, 0.7), stats::rnorm(n, -2, 0.4), stats::rnorm(n, 1, 0.5))
    a[!z, ] <- b[!z, ]
    a
  }
  list(a = draw(300), b = draw(250))
}

# The diagonal type's fits: the first two dimensions, three components (the size of a
# diagonal kernel the Python tests compile, M = 3, D = 2).
diag_data <- function(data) lapply(data, function(x) x[, 1:2])

# The covariance matrix of component j of a components table's rows, by type.
cov_matrix <- function(rows, j, type, D = 2L) {
  if (identical(type, "spherical")) {
    return(diag(rows$var[j], D))
  }
  S <- matrix(0, D, D)
  for (p in seq_len(D)) {
    for (q in seq_len(p)) {
      S[p, q] <- S[q, p] <- rows[[sprintf("cov_%d_%d", p, q)]][j]
    }
  }
  S
}

# log(w_j N(x; mu_j, S_j)) for every point (a row of x) and component: an n x M matrix,
# the normal density written out (solve() and determinant(), no Cholesky).
direct_log_terms <- function(rows, x, type) {
  rows <- rows[order(rows$component), , drop = FALSE]
  D <- ncol(x)
  sapply(seq_len(nrow(rows)), function(j) {
    S <- cov_matrix(rows, j, type, D)
    mu <- vapply(seq_len(D), function(d) rows[[paste0("mean_", d)]][j], numeric(1))
    xc <- sweep(x, 2L, mu)
    quad <- rowSums((xc %*% solve(S)) * xc)
    logdet <- as.numeric(determinant(S, logarithm = TRUE)$modulus)
    log(rows$weight[j]) - 0.5 * (D * log(2 * pi) + logdet + quad)
  })
}

direct_density <- function(rows, x, type) rowSums(exp(direct_log_terms(rows, x, type)))

direct_posterior <- function(rows, x, type) {
  lc <- direct_log_terms(rows, x, type)
  e <- exp(lc - apply(lc, 1L, max))
  e / rowSums(e)
}

rel_diff <- function(a, b) max(abs(a - b) / pmax(abs(b), .Machine$double.xmin))

test_that("full and spherical covariances: tables and R methods, against a direct computation", {
  skip_if_no_bulkem()
  data <- cov_data()
  pts <- rbind(c(0, 0, 0), c(4, -2, 1), c(1.5, -0.5, 0.5), c(-2, 3, -1), c(10, 10, 10))
  for (type in c("full", "spherical")) {
    fit <- fit_mixture(data, family = "gaussian", covariance_type = type, starts = 3,
                       seed = 1, max_iter = 500, backend = "cpu")
    expect_s3_class(fit, "bulkem_fit")
    expect_identical(attr(fit, "family"), "gaussian")
    expect_identical(attr(fit, "covariance_type"), type)
    expect_identical(attr(fit, "n_dims"), 3L)
    expect_identical(fit$summary$status, c("converged", "converged"))
    cols <- if (type == "full") {
      c("dataset", "component", "weight", "mean_1", "mean_2", "mean_3", "cov_1_1", "cov_2_1",
        "cov_2_2", "cov_3_1", "cov_3_2", "cov_3_3")
    } else {
      c("dataset", "component", "weight", "mean_1", "mean_2", "mean_3", "var")
    }
    expect_identical(names(fit$components), cols, info = type)
    expect_identical(names(fit$start_values), c(cols[1L], "start", cols[-1L]), info = type)
    # free parameters: weights M - 1, means M D, covariances M D (D + 1) / 2 or M
    expect_identical(attr(logLik(fit), "df"), if (type == "full") 19L else 9L)
    expect_match(utils::capture.output(print(fit))[1L],
                 if (type == "full") "gaussian mixture (full covariance matrices), 2 components"
                 else "gaussian mixture (spherical covariances), 2 components", fixed = TRUE)
    expect_match(utils::capture.output(print(summary(fit)))[1L], "gaussian mixture (",
                 fixed = TRUE)
    # the full fit finds the correlation of the first cluster
    if (type == "full") {
      first <- fit$components[fit$components$dataset == "a" & fit$components$component == 1L, ]
      expect_gt(first$cov_2_1 / sqrt(first$cov_1_1 * first$cov_2_2), 0.7)
    }
    for (id in c("a", "b")) {
      rows <- fit$components[fit$components$dataset == id, ]
      x <- data[[id]]
      # the log-likelihood is the direct computation's, to 1e-8 relative
      ll <- sum(log(direct_density(rows, x, type)))
      expect_lt(rel_diff(fit$summary$loglik[fit$summary$dataset == id], ll), 1e-8)
      # density, predict and fitted: computed in R from the table, as directly
      expect_lt(rel_diff(mixture_density(fit, id, pts), direct_density(rows, pts, type)),
                1e-10)
      p <- predict(fit, pts, dataset = id)
      z <- direct_posterior(rows, pts, type)
      expect_equal(unname(p$z), z, tolerance = 1e-10)
      expect_identical(p$classification, max.col(z, ties.method = "first"))
      expect_equal(unname(fitted(fit, id, type = "prob")), direct_posterior(rows, x, type),
                   tolerance = 1e-10)
      expect_identical(fitted(fit, id), max.col(direct_posterior(rows, x, type),
                                                ties.method = "first"))
      # and Python's own density and posteriors at the same points
      py <- attr(fit, "python")
      expect_equal(mixture_density(fit, id, pts),
                   bulkem:::py_numbers(py$density(id, bulkem:::py_hmm_array(pts))),
                   tolerance = 1e-10)
      expect_equal(unname(p$z),
                   bulkem:::py_matrix(py$predict_proba(id, bulkem:::py_hmm_array(pts))),
                   tolerance = 1e-10)
    }
    # coef: the table's parameter columns, one per component
    expect_identical(colnames(coef(fit))[1:2], c("weight[1]", "weight[2]"))
    expect_true(all(paste0(cols[-(1:2)], "[2]") %in% colnames(coef(fit))))
    expect_equal(coef(fit)["b", "mean_2[2]"],
                 fit$components$mean_2[fit$components$dataset == "b" &
                                          fit$components$component == 2L])
    # a subset keeps the covariance type
    sub <- fit["b"]
    expect_identical(attr(sub, "covariance_type"), type)
    expect_identical(mixture_density(sub, "b", pts), mixture_density(fit, "b", pts))
    # values drawn from the fit (Python's sampler of the type)
    s <- mixture_sample(fit, "a", n = 400, seed = 2)
    expect_identical(names(s), c("value_1", "value_2", "value_3", "component"))
    expect_identical(nrow(s), 400L)
    expect_true(all(s$component %in% 1:2))
  }
})

test_that("tied covariances: one matrix for every component, against a direct computation", {
  skip_if_no_bulkem()
  # (the tied kernel at M = 2, D = 3: the Python tests' size)
  data <- cov_data()
  fit <- fit_mixture(data, family = "gaussian", covariance_type = "tied", starts = 3, seed = 1,
                     max_iter = 500, backend = "cpu")
  expect_identical(attr(fit, "covariance_type"), "tied")
  expect_identical(fit$summary$status, c("converged", "converged"))
  cov_cols <- c("cov_1_1", "cov_2_1", "cov_2_2", "cov_3_1", "cov_3_2", "cov_3_3")
  expect_true(all(c("weight", "mean_1", "mean_2", "mean_3", cov_cols) %in%
                    names(fit$components)))
  # free parameters: weights M - 1, means M D, one covariance matrix D (D + 1) / 2
  expect_identical(attr(logLik(fit), "df"), 13L)
  expect_match(utils::capture.output(print(fit))[1L], "tied covariance matrix", fixed = TRUE)
  pts <- rbind(c(0, 0, 0), c(4, -2, 1), c(1.5, -0.5, 0.5))
  for (id in c("a", "b")) {
    rows <- fit$components[fit$components$dataset == id, ]
    for (col in cov_cols) expect_identical(rows[[col]][1L], rows[[col]][2L], info = col)
    ll <- sum(log(direct_density(rows, data[[id]], "full")))
    expect_lt(rel_diff(fit$summary$loglik[fit$summary$dataset == id], ll), 1e-8)
    expect_lt(rel_diff(mixture_density(fit, id, pts), direct_density(rows, pts, "full")),
              1e-10)
    expect_equal(unname(predict(fit, pts, dataset = id)$z), direct_posterior(rows, pts, "full"),
                 tolerance = 1e-10)
  }
  # the same fits as Python's
  py <- py_bulkem()$fit(lapply(data, bulkem:::py_hmm_array), family = "gaussian",
                        covariance_type = "tied", n_components = 2L, n_starts = 3L, seed = 1L,
                        max_iter = 500L, backend = "cpu", progress = FALSE)
  expect_equal(fit$summary$loglik, py_col(py$summary, "loglik"), tolerance = 1e-12)
})

test_that("three dimensions: the cov_ columns are each lower triangle, row by row", {
  skip_if_no_bulkem()
  set.seed(13)
  S <- matrix(c(1, 0.6, -0.3, 0.6, 2, 0.5, -0.3, 0.5, 1.5), 3, 3)
  x <- rbind(matrix(stats::rnorm(600), 200) %*% chol(S),
             sweep(matrix(stats::rnorm(450, sd = 0.5), 150), 2L, c(5, -4, 3), "+"))
  fit <- fit_mixture(list(x), family = "gaussian", covariance_type = "full", starts = 2,
                     seed = 1, max_iter = 500, backend = "cpu")
  rows <- fit$components
  expect_identical(names(rows), c("dataset", "component", "weight", "mean_1", "mean_2",
                                  "mean_3", "cov_1_1", "cov_2_1", "cov_2_2", "cov_3_1",
                                  "cov_3_2", "cov_3_3"))
  # the correlated component's covariance is near S, entry by entry
  first <- rows[rows$component == which.max(rows$cov_2_2), ]
  expect_equal(c(first$cov_2_1, first$cov_3_1, first$cov_3_2), c(0.6, -0.3, 0.5),
               tolerance = 0.3)
  expect_lt(rel_diff(fit$summary$loglik, sum(log(direct_density(rows, x, "full")))), 1e-8)
  pts <- rbind(c(0, 0, 0), c(5, -4, 3), c(1, 2, -1))
  expect_lt(rel_diff(mixture_density(fit, 1, pts), direct_density(rows, pts, "full")), 1e-10)
  expect_equal(mixture_density(fit, 1, pts),
               bulkem:::py_numbers(attr(fit, "python")$density(0L,
                                                                bulkem:::py_hmm_array(pts))),
               tolerance = 1e-10)
  # init as matrices reaches Python as these triangles
  again <- fit_mixture(list(x), family = "gaussian", covariance_type = "full", starts = 1,
                       seed = 1, max_iter = 500, backend = "cpu",
                       init = list(weight = c(0.5, 0.5), mean = rbind(c(0, 0, 0), c(5, -4, 3)),
                                   cov = list(S, diag(c(0.3, 0.2, 0.1)))))
  expect_equal(unlist(again$start_values[1, c("cov_1_1", "cov_2_1", "cov_2_2", "cov_3_1",
                                              "cov_3_2", "cov_3_3")]),
               c(cov_1_1 = 1, cov_2_1 = 0.6, cov_2_2 = 2, cov_3_1 = -0.3, cov_3_2 = 0.5,
                 cov_3_3 = 1.5))
})

test_that("one dimension: full and spherical covariances are dnorm mixtures; plot() draws them", {
  skip_if_no_bulkem()
  set.seed(8)
  x <- list(c(stats::rnorm(200, 0, 1), stats::rnorm(150, 5, 0.5)))
  for (type in c("full", "spherical")) {
    fit <- fit_mixture(x, family = "gaussian", covariance_type = type, starts = 2, seed = 1,
                       backend = "cpu")
    rows <- fit$components
    var <- if (type == "full") rows$cov_1_1 else rows$var
    grid <- c(-1, 0.5, 2, 5.2)
    d <- rowSums(sapply(1:2, function(j) {
      rows$weight[j] * stats::dnorm(grid, rows$mean_1[j], sqrt(var[j]))
    }))
    expect_equal(mixture_density(fit, 1, grid), d, tolerance = 1e-12)
    expect_equal(fit$summary$loglik,
                 sum(log(rowSums(sapply(1:2, function(j) {
                   rows$weight[j] * stats::dnorm(x[[1]], rows$mean_1[j], sqrt(var[j]))
                 })))), tolerance = 1e-10)
    file <- tempfile(fileext = ".png")
    grDevices::png(file)
    plot(fit)
    grDevices::dev.off()
    expect_gt(file.size(file), 2000)
    unlink(file)
  }
})

test_that("loglik_at() takes covariance_type, and cov as lower triangles or matrices", {
  skip_if_no_bulkem()
  data <- cov_data()
  for (type in c("full", "spherical")) {
    fit <- fit_mixture(data, family = "gaussian", covariance_type = type, starts = 2,
                       seed = 1, max_iter = 500, backend = "cpu")
    params <- lapply(c("a", "b"), function(id) {
      rows <- fit$components[fit$components$dataset == id, ]
      p <- list(weight = rows$weight,
                mean = as.matrix(rows[, c("mean_1", "mean_2", "mean_3")]))
      if (type == "full") {
        p$cov <- as.matrix(rows[, c("cov_1_1", "cov_2_1", "cov_2_2", "cov_3_1", "cov_3_2",
                                    "cov_3_3")])
      } else {
        p$var <- rows$var
      }
      lapply(p, unname)
    })
    out <- loglik_at(data, "gaussian", params, covariance_type = type, backend = "cpu")
    expect_identical(out$dataset, c("a", "b"))
    expect_equal(out$loglik, fit$summary$loglik, tolerance = 1e-10)
    direct <- vapply(c("a", "b"), function(id) {
      sum(log(direct_density(fit$components[fit$components$dataset == id, ], data[[id]],
                             type)))
    }, numeric(1))
    expect_lt(rel_diff(out$loglik, unname(direct)), 1e-8)
    if (type == "full") {
      # the covariance matrices as a list of D x D matrices, one per component
      as_matrices <- lapply(params, function(p) {
        p$cov <- lapply(seq_len(nrow(p$cov)), function(j) {
          matrix(p$cov[j, c(1, 2, 4, 2, 3, 5, 4, 5, 6)], 3, 3)
        })
        p
      })
      expect_identical(loglik_at(data, "gaussian", as_matrices, covariance_type = "full",
                                 backend = "cpu")$loglik, out$loglik)
      # one parameter set for both datasets, matrices or triangles
      one <- loglik_at(data, "gaussian", as_matrices[[1]], covariance_type = "full",
                       backend = "cpu")
      expect_identical(one$loglik[1], out$loglik[1])
      expect_identical(loglik_at(data, "gaussian", params[[1]], covariance_type = "full",
                                 backend = "cpu")$loglik, one$loglik)
      bad <- as_matrices[[1]]
      bad$cov[[2]] <- matrix(c(1, 0.5, 0, 0, 1, 0, 0, 0, 1), 3, 3)
      expect_error(loglik_at(data, "gaussian", bad, covariance_type = "full"),
                   "params$cov[[2]] is not symmetric", fixed = TRUE)
    }
  }
  # the diagonal type's blocks are refused for another type, by Python, in R's terms
  expect_error(loglik_at(data, "gaussian", list(weight = c(0.5, 0.5),
                                                mean = rbind(c(0, 0, 0), c(1, 1, 1)),
                                                var = matrix(1, 2, 3)), covariance_type = "full"))
  expect_error(loglik_at(data, "poisson", list(weight = 1, rate = 2), covariance_type = "full"),
               "`covariance_type` is an option of the Gaussian family", fixed = TRUE)
  expect_error(loglik_at(data, "gaussian", list(weight = 1), covariance_type = "banana"),
               "`covariance_type` must be \"diag\"", fixed = TRUE)
})

test_that("init for full and spherical covariances, and covariance_type's checks", {
  skip_if_no_bulkem()
  data <- cov_data()
  S1 <- matrix(c(1, 0.7, 0, 0.7, 1, 0, 0, 0, 0.6), 3, 3)
  S2 <- diag(c(0.5, 0.2, 0.3))
  mean <- rbind(c(0, 0, 0), c(4, -2, 1))
  # one start, covariance matrices as a list
  fit <- fit_mixture(data["a"], family = "gaussian", covariance_type = "full", starts = 1,
                     seed = 1, max_iter = 500, backend = "cpu",
                     init = list(weight = c(0.4, 0.6), mean = mean, cov = list(S1, S2)))
  sv <- fit$start_values
  expect_identical(sv$start, c(1L, 1L))
  expect_equal(sv$cov_2_1, c(0.7, 0))
  expect_equal(sv$cov_2_2, c(1, 0.2))
  expect_equal(sv$mean_1, c(0, 4))
  # the same as lower triangles, row by row (the cov_ columns)
  tri <- fit_mixture(data["a"], family = "gaussian", covariance_type = "full", starts = 1,
                     seed = 1, max_iter = 500, backend = "cpu",
                     init = list(weight = c(0.4, 0.6), mean = mean,
                                 cov = rbind(c(1, 0.7, 1, 0, 0, 0.6),
                                             c(0.5, 0, 0.2, 0, 0, 0.3))))
  expect_identical(tri$components, fit$components)
  # two starts: a list of lists of matrices, and arrays starts x components x ...
  two <- fit_mixture(data["a"], family = "gaussian", covariance_type = "full", starts = 2,
                     seed = 1, max_iter = 500, backend = "cpu",
                     init = list(weight = rbind(c(0.4, 0.6), c(0.5, 0.5)),
                                 mean = aperm(array(c(mean, mean + 0.5), c(2, 3, 2)),
                                              c(3, 1, 2)),
                                 cov = list(list(S1, S2), list(S2, S1))))
  sv <- two$start_values
  expect_equal(sv$cov_2_1[sv$start == 2L], c(0, 0.7))
  expect_equal(sv$mean_2[sv$start == 2L], c(0.5, -1.5))
  # spherical: one variance per component
  sph <- fit_mixture(data["a"], family = "gaussian", covariance_type = "spherical",
                     starts = 1, seed = 1, max_iter = 500, backend = "cpu",
                     init = list(weight = c(0.4, 0.6), mean = mean, var = c(1, 0.3)))
  expect_equal(sph$start_values$var, c(1, 0.3))
  # checks
  expect_error(fit_mixture(data, family = "gaussian", covariance_type = "full",
                           init = list(weight = c(0.5, 0.5), mean = mean,
                                       cov = list(S1, matrix(1:3, 1)))),
               "init$cov[[2]] must be a covariance matrix", fixed = TRUE)
  expect_error(fit_mixture(data, family = "gaussian", covariance_type = "full", init = 1),
               "and cov (the covariance matrices", fixed = TRUE)
  expect_error(fit_mixture(list(1:5), covariance_type = "full"),
               paste0("`covariance_type` is an option of the Gaussian family (family = ",
                      "\"gaussian\"); family = \"invgauss\" has no covariance matrix."),
               fixed = TRUE)
  expect_error(fit_mixture(data, family = "gaussian", covariance_type = "banana"),
               "`covariance_type` must be \"diag\"", fixed = TRUE)
  expect_error(fit_mixture(data, family = "gaussian", covariance_type = c("full", "diag")),
               "`covariance_type` must be \"diag\"", fixed = TRUE)
  # "diag", said or not, is the fit of before
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  diag1 <- quiet(fit_mixture(diag_data(data), family = "gaussian", components = 3, starts = 2,
                             seed = 1, max_iter = 500, backend = "cpu"))
  diag2 <- quiet(fit_mixture(diag_data(data), family = "gaussian", covariance_type = "diag",
                             components = 3, starts = 2, seed = 1, max_iter = 500,
                             backend = "cpu"))
  expect_identical(diag1$components, diag2$components)
  expect_identical(attr(diag1, "covariance_type"), "diag")
  expect_true(all(c("var_1", "var_2") %in% names(diag1$components)))
})

test_that("a grid of sizes of full covariances, and fit_size()", {
  skip_if_no_bulkem()
  data <- cov_data()
  grid <- fit_mixture(data, family = "gaussian", covariance_type = "full", components = 1:3,
                      starts = 2, seed = 1, max_iter = 500, backend = "cpu")
  expect_identical(attr(grid, "covariance_type"), "full")
  expect_identical(grid$summary$n_components, c(2L, 2L))
  two <- fit_size(grid, 2)
  expect_identical(attr(two, "covariance_type"), "full")
  expect_identical(two$components, grid$components)
  pts <- rbind(c(0, 0, 0), c(4, -2, 1))
  rows <- grid$components[grid$components$dataset == "b", ]
  expect_lt(rel_diff(mixture_density(grid, "b", pts), direct_density(rows, pts, "full")), 1e-10)
})

test_that("fits of full and spherical covariances saved and read back in a new session", {
  skip_if_no_bulkem()
  data <- cov_data()
  fits <- list(
    full = fit_mixture(data, family = "gaussian", covariance_type = "full", starts = 2,
                       seed = 1, max_iter = 500, backend = "cpu"),
    spherical = fit_mixture(data, family = "gaussian", covariance_type = "spherical",
                            starts = 2, seed = 1, max_iter = 500, backend = "cpu"),
    grid = fit_mixture(data, family = "gaussian", covariance_type = "full", components = 1:2,
                       starts = 2, seed = 1, max_iter = 500, backend = "cpu")
  )
  results <- function(fits) {
    pts <- rbind(c(0, 0, 0), c(4, -2, 1), c(1.5, -0.5, 0.5))
    out <- list()
    for (name in names(fits)) {
      f <- fits[[name]]
      out[[name]] <- list(
        print = utils::capture.output(print(f)),
        predict = predict(f, pts, dataset = "b"),
        density = mixture_density(f, "a", pts),
        fitted = fitted(f, "b", type = "prob"),
        coef = coef(f),
        sample = mixture_sample(f, "a", n = 5, seed = 3)
      )
    }
    out
  }
  live <- results(fits)
  dir <- tempfile("saved_cov")
  dir.create(dir)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  saveRDS(fits, file.path(dir, "fits.rds"))
  out <- run_new_session(c(
    "library(bulkem)",
    paste("results <-", paste(deparse(results), collapse = "\n")),
    sprintf("fits <- readRDS('%s')", file.path(dir, "fits.rds")),
    "gone <- vapply(fits, function(f) reticulate::py_is_null_xptr(attr(f, 'python')), TRUE)",
    "out <- results(fits)",
    "out$gone <- gone",
    sprintf("saveRDS(out, '%s')", file.path(dir, "back.rds")),
    "cat('SAVED RESULTS OK\\n')"
  ))
  expect_true(any(out == "SAVED RESULTS OK"), info = paste(out, collapse = "\n"))
  back <- readRDS(file.path(dir, "back.rds"))
  expect_true(all(back$gone))
  for (name in names(fits)) {
    for (what in names(live[[name]])) {
      expect_identical(back[[name]][[what]], live[[name]][[what]], info = paste(name, what))
    }
  }
  # in this session too, after the Python object is gone
  file <- file.path(dir, "one.rds")
  saveRDS(fits$full, file)
  one <- readRDS(file)
  expect_identical(predict(one, rbind(c(0, 0, 0), c(4, -2, 1)), dataset = "a"),
                   predict(fits$full, rbind(c(0, 0, 0), c(4, -2, 1)), dataset = "a"))
})
