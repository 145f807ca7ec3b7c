# R's standard methods on fits: logLik (df, nobs), AIC, BIC, nobs, coef,
# summary, predict, as.data.frame, `[`; and a fit saved with saveRDS().

methods_fit <- function() {
  data <- demo_data(3L, 300L, 21L)
  fit <- fit_mixture(stats::setNames(data$r, c("a", "b", "c")), starts = 3, seed = 5,
                     max_iter = 1000, backend = "cpu")
  list(fit = fit, data = data)
}

test_that("logLik() has df and nobs; AIC() and BIC() follow from it", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  ll <- logLik(fit)
  expect_s3_class(ll, "logLik")
  expect_equal(as.numeric(ll), fit$summary$loglik)
  expect_identical(attr(ll, "df"), 5L) # 2 weights - 1 + 2 mu + 2 lambda
  expect_identical(attr(ll, "nobs"), fit$summary$n_obs)
  expect_identical(nobs(fit), c(300L, 300L, 300L))
  expect_equal(AIC(fit), fit$summary$aic, tolerance = 1e-12)
  expect_equal(BIC(fit), fit$summary$bic, tolerance = 1e-12)
  # one dataset: models compared the usual way
  one <- fit["b"]
  three <- suppressWarnings(fit_mixture(methods_fit()$data$r[[2]], components = 3, starts = 3,
                                        seed = 5, max_iter = 1000, backend = "cpu"))
  cmp <- AIC(one, three)
  expect_equal(cmp$df, c(5, 8))
  expect_equal(cmp$AIC, c(fit$summary$aic[2], three$summary$aic))
  expect_output(print(logLik(one)), "'log Lik.' .* \\(df=5\\)")
})

test_that("coef() is a matrix with a row per dataset, one column per parameter", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  cf <- coef(fit)
  expect_identical(dim(cf), c(3L, 6L))
  expect_identical(rownames(cf), c("a", "b", "c"))
  expect_identical(colnames(cf),
                   c("weight[1]", "weight[2]", "mu[1]", "mu[2]", "lambda[1]", "lambda[2]"))
  comp <- fit$components
  expect_equal(unname(cf["b", c("mu[1]", "mu[2]")]), comp$mu[comp$dataset == "b"])
  expect_equal(unname(cf["c", "lambda[2]"]), comp$lambda[comp$dataset == "c" & comp$component == 2])
})

test_that("summary() is an object of its own with a print method", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  s <- summary(fit)
  expect_s3_class(s, "summary.bulkem_fit")
  expect_identical(s$df, 5L)
  expect_equal(s$fits$loglik, fit$summary$loglik)
  expect_equal(sum(s$status), 3L)
  out <- capture.output(print(s))
  expect_match(out[1], "bulkem fit: invgauss mixture, 2 components, 3 datasets")
  expect_true(any(grepl("^Dataset b: n = 300, converged after [0-9]+ iterations", out)))
  expect_true(any(grepl("component +weight +mu +lambda", out)))
  expect_output(print(summary(fit), max_datasets = 1), "2 more datasets")
})

test_that("predict() gives posterior probabilities and classes, as Python", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  x <- c(-1, 0, 1e-300, 1e-3, 0.2, 0.9, 1, 2.5, 3, 10, 1e3, 1e8)
  p <- predict(fit, x, dataset = "b")
  expect_named(p, c("classification", "z"))
  expect_identical(dim(p$z), c(length(x), 2L))
  expect_equal(rowSums(p$z), rep(1, length(x)))
  py <- attr(fit, "python")
  z_py <- bulkem:::py_matrix(py$predict_proba("b", bulkem:::py_float_array(x)))
  expect_equal(unname(p$z), z_py, tolerance = 1e-10)
  expect_identical(p$classification,
                   as.integer(bulkem:::py_numbers(py$predict("b", bulkem:::py_float_array(x)))))
  expect_error(predict(fit, x), "This fit has 3 datasets; say which with `dataset = `")
  expect_error(predict(fit, dataset = "a"), "`newdata` is missing")
  expect_error(predict(fit, x, dataset = "zz"), "dataset \"zz\" has no fit: no such dataset.",
               fixed = TRUE)
  expect_identical(predict(fit["a"], x)$z, predict(fit, x, dataset = "a")$z)
})

test_that("as.data.frame() gives a table; fit[i] keeps the datasets i", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  expect_identical(as.data.frame(fit), fit$summary)
  expect_identical(as.data.frame(fit, table = "components"), fit$components)
  expect_error(as.data.frame(fit, table = "x"), "`table` must be one of \"summary\"")
  sub <- fit[c("c", "a")]
  expect_s3_class(sub, "bulkem_fit")
  expect_identical(sub$summary$dataset, c("c", "a"))
  expect_identical(unique(sub$components$dataset), c("c", "a"))
  expect_identical(unique(sub$starts$dataset), c("c", "a"))
  expect_identical(nrow(sub$start_values), 2L * 3L * 2L)
  expect_identical(fit[2]$summary$dataset, "b") # a position, for named datasets
  expect_identical(fit[c(TRUE, FALSE, TRUE)]$summary$dataset, c("a", "c"))
  expect_identical(attr(sub, "seed"), attr(fit, "seed"))
  expect_equal(mixture_density(sub, "a", 1:3), mixture_density(fit, "a", 1:3))
  expect_error(fit["zz"], "This fit has no dataset \"zz\"; its datasets are a, b, c.", fixed = TRUE)
  # datasets by position: ids are positions
  data <- methods_fit()$data
  byp <- fit_mixture(data$r, starts = 2, seed = 5, max_iter = 1000, backend = "cpu")
  expect_identical(byp[3:2]$summary$dataset, 3:2)
  expect_equal(mixture_density(byp[3], 3, 1), mixture_density(byp, 3, 1))
})

test_that("fitted() gives each value's component, as predict() does; residuals() says why not", {
  skip_if_no_bulkem()
  m <- methods_fit()
  fit <- m$fit
  x <- m$data$r[[2]]
  expect_identical(fitted(fit, "b"), predict(fit, x, dataset = "b")$classification)
  expect_equal(fitted(fit, "b", type = "prob"), predict(fit, x, dataset = "b")$z)
  py <- attr(fit, "python") # Python's own classes of the same values
  expect_identical(fitted(fit, "b"),
                   as.integer(bulkem:::py_numbers(py$predict("b", bulkem:::py_float_array(x)))))
  every <- fitted(fit)
  expect_named(every, c("a", "b", "c"))
  expect_identical(lengths(every), c(a = 300L, b = 300L, c = 300L))
  expect_identical(every$b, fitted(fit, "b"))
  expect_identical(fitted(fit["c"]), fitted(fit, "c"))
  expect_error(fitted(fit, "b", type = "z"), "'arg' should be one of")
  expect_error(fitted(fit, "zz"), "dataset \"zz\" has no fit: no such dataset.", fixed = TRUE)
  expect_error(residuals(fit), "residuals() has no meaning for a mixture", fixed = TRUE)
  # a dataset without a fit: NULL among all, an error alone
  some <- suppressWarnings(fit_mixture(list(x, c(1, NA, 2)), starts = 2, seed = 5,
                                       max_iter = 1000, backend = "cpu"))
  expect_identical(names(fitted(some)), c("1", "2"))
  expect_null(fitted(some)[["2"]])
  expect_error(fitted(some, 2), "dataset 2 has no fit: its status is \"invalid_data\".",
               fixed = TRUE)
})

test_that("a fit saved with saveRDS() keeps working when read back", {
  skip_if_no_bulkem()
  fit <- methods_fit()$fit
  x <- seq(0.1, 6, by = 0.1)
  file <- tempfile(fileext = ".rds")
  on.exit(unlink(file), add = TRUE)
  saveRDS(fit, file)
  back <- readRDS(file)
  expect_true(reticulate::py_is_null_xptr(attr(back, "python")))
  expect_equal(mixture_density(back, "a", x), mixture_density(fit, "a", x))
  expect_equal(predict(back, x, dataset = "c"), predict(fit, x, dataset = "c"))
  expect_equal(logLik(back), logLik(fit))
  expect_equal(BIC(back), BIC(fit))
  expect_equal(coef(back), coef(fit))
  expect_output(print(back), "bulkem fit: invgauss mixture")
  expect_output(print(summary(back)), "Dataset a")
  # fitted() and plot() from the values the fit keeps (see test-saved.R)
  expect_identical(fitted(back), fitted(fit))
  expect_identical(fitted(back, "b", type = "prob"), fitted(fit, "b", type = "prob"))
  path <- tempfile(fileext = ".png")
  on.exit(unlink(path), add = TRUE)
  grDevices::png(path)
  expect_identical(plot(back, "c"), back)
  grDevices::dev.off()
  expect_gt(file.size(path), 2000)
  # and in a new R session
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(c(
    "library(bulkem)",
    sprintf("fit <- readRDS('%s')", file),
    "cat('DENSITY', format(mixture_density(fit, 'a', c(0.5, 1, 2)), digits = 17), '\\n')",
    "cat('BIC', format(BIC(fit), digits = 17), '\\n')"
  ), script)
  out <- suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", script),
    stdout = TRUE, stderr = TRUE,
    env = paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  ))
  dens <- as.numeric(strsplit(sub("^DENSITY ", "", grep("^DENSITY", out, value = TRUE)), " ")[[1]])
  expect_equal(dens[!is.na(dens)], mixture_density(fit, "a", c(0.5, 1, 2)), tolerance = 1e-15,
               info = paste(out, collapse = "\n"))
})
