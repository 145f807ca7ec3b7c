# Standard errors: se = TRUE (bulkem.fit(se=True)) adds se_ columns to the
# tables, and vcov() gives a dataset's covariance matrix, also after saveRDS().

test_that("fit_mixture(se = TRUE) adds se_ columns and vcov() their covariances", {
  skip_if_no_bulkem()
  d <- demo_data(3L, 200L, 11L)
  fit <- fit_mixture(d$r, components = 2, starts = 3, seed = 1, backend = "cpu", se = TRUE)
  comp <- fit$components
  expect_true(all(c("se_weight", "se_mu", "se_lambda") %in% names(comp)))
  ok <- as.character(fit$summary$dataset[fit$summary$status == "converged" &
                                          !grepl("standard errors NaN", fit$summary$message)])
  expect_true(length(ok) > 0L)
  rows <- as.character(comp$dataset) %in% ok
  for (col in c("se_weight", "se_mu", "se_lambda")) {
    expect_true(all(is.finite(comp[[col]][rows]) & comp[[col]][rows] > 0), info = col)
  }
  # the se_ columns are the square roots of vcov()'s diagonal
  for (id in ok) {
    v <- vcov(fit, dataset = id)
    expect_true(is.matrix(v) && is.numeric(v))
    expect_identical(dimnames(v)[[1L]], c("weight_1", "mu_1", "lambda_1",
                                          "weight_2", "mu_2", "lambda_2"))
    expect_identical(dimnames(v)[[1L]], dimnames(v)[[2L]])
    expect_equal(v, t(v))
    r <- comp[as.character(comp$dataset) == id, , drop = FALSE]
    r <- r[order(r$component), , drop = FALSE]
    se <- sqrt(diag(v))
    for (p in c("weight", "mu", "lambda")) {
      expect_equal(unname(se[paste0(p, "_", 1:2)]), r[[paste0("se_", p)]], tolerance = 1e-10,
                   info = paste(id, p))
    }
  }
  # ... and Python's cov(d) (dataset 2 is Python's 1)
  py_v <- attr(fit, "python")$cov(1L)
  expect_equal(unname(vcov(fit, 2)),
               matrix(unlist(reticulate::py_to_r(py_v$values$tolist())), 6L, byrow = TRUE),
               tolerance = 1e-12)
  # the parameters of coef() are the parameters, not their standard errors
  expect_false(any(grepl("^se_", colnames(coef(fit)))))
  expect_identical(dim(coef(fit)), c(3L, 6L))
  expect_output(print(fit), "bulkem fit: invgauss mixture")
  expect_output(print(summary(fit)), "se_mu")
  # fit[i] keeps the covariances of the datasets it keeps
  sub <- fit[2]
  expect_equal(vcov(sub, 2), vcov(fit, 2))
  expect_error(vcov(sub, 1), "no such dataset")
  expect_error(vcov(fit), "say which with `dataset = `")
  # a saved fit keeps its se_ columns and covariances (no Python needed)
  path <- tempfile(fileext = ".rds")
  on.exit(unlink(path), add = TRUE)
  saveRDS(fit, path)
  back <- readRDS(path)
  expect_identical(back$components, fit$components)
  expect_identical(vcov(back, 3), vcov(fit, 3))
  expect_identical(coef(back), coef(fit))

  # without se: no se_ columns, and vcov() says how to get them
  plain <- fit_mixture(d$r, components = 2, starts = 3, seed = 1, backend = "cpu")
  expect_false(any(startsWith(names(plain$components), "se_")))
  expect_error(vcov(plain, 1), "fit with se = TRUE", fixed = TRUE)
  expect_error(fit_mixture(d$r, se = NA), "`se` must be TRUE or FALSE, got NA.", fixed = TRUE)
  expect_error(fit_mixture(d$r, se = "yes"), "`se` must be TRUE or FALSE", fixed = TRUE)
})

test_that("fit_ssm(se = TRUE) adds a column se to the long components table", {
  skip_if_no_bulkem()
  set.seed(9)
  data <- list(a = ar1_noise(200), b = ar1_noise(200))
  fit <- suppressWarnings(
    fit_ssm(data, "ar", order = 1, starts = 2, seed = 4, backend = "cpu", se = TRUE),
    classes = "bulkem_not_converged"
  )
  comp <- fit$components
  expect_true("se" %in% names(comp))
  expect_identical(colnames(coef(fit)), c("phi_1", "state_var", "obs_var"))
  v <- vcov(fit, "a")
  expect_identical(dim(v), c(3L, 3L))
  rows <- comp[comp$dataset == "a", , drop = FALSE]
  expect_equal(unname(sqrt(diag(v))[match(rows$parameter, rownames(v))]), rows$se,
               tolerance = 1e-10)
  expect_error(fit_ssm(data, "ar", se = 1), "`se` must be TRUE or FALSE", fixed = TRUE)
})
