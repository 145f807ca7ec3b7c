# family = "poisson": mixtures of Poisson distributions of counts (weight, rate per
# component). fit_mixture(), the methods that compute the density in R from the
# components table (predict, fitted, mixture_density, plot), mixture_sample() and
# loglik_at(), against R's dpois().

# Three datasets of 300 counts, half of rate 2, half of rate 15 (R's random numbers).
poisson_counts <- function() {
  set.seed(17)
  stats::setNames(lapply(1:3, function(i) c(stats::rpois(150, 2), stats::rpois(150, 15))),
                  c("a", "b", "c"))
}

poisson_fit <- function(x = poisson_counts(), ...) {
  suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(x, family = "poisson", components = 2, starts = 3, max_iter = 500, seed = 4,
                backend = "cpu", ...))
}

# Each component's weighted probabilities w_k dpois(x, rate_k) (a column each) for one
# dataset's components, in component order.
weighted_dpois <- function(fit, id, x) {
  rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
  rows <- rows[order(rows$component), , drop = FALSE]
  sapply(seq_len(nrow(rows)), function(k) rows$weight[k] * stats::dpois(x, rows$rate[k]))
}

rel_diff <- function(a, b) max(abs(a - b) / abs(b))

test_that("fit_mixture(family = \"poisson\") fits counts: weights and rates, their loglik", {
  skip_if_no_bulkem()
  x <- poisson_counts()
  fit <- poisson_fit(x, se = TRUE)
  expect_s3_class(fit, "bulkem_fit")
  expect_identical(attr(fit, "family"), "poisson")
  expect_identical(fit$summary$dataset, c("a", "b", "c"))
  expect_true(all(fit$summary$status %in% c("converged", "max_iter")))
  expect_named(fit$components, c("dataset", "component", "weight", "rate", "se_weight",
                                 "se_rate"))
  comp <- fit$components
  expect_identical(comp$component, rep(1:2, 3))
  expect_true(all(comp$rate[comp$component == 1] < comp$rate[comp$component == 2]))
  expect_true(all(abs(comp$rate[comp$component == 1] - 2) < 0.6))
  expect_true(all(abs(comp$rate[comp$component == 2] - 15) < 2))
  expect_true(all(is.finite(comp$se_rate) & comp$se_rate > 0))
  # the log-likelihood is that of the counts under the fitted mixture, by dpois()
  for (id in names(x)) {
    expected <- sum(log(rowSums(weighted_dpois(fit, id, x[[id]]))))
    expect_lt(rel_diff(fit$summary$loglik[fit$summary$dataset == id], expected), 1e-8)
  }
  expect_identical(attr(logLik(fit), "df"), 3L) # 2 weights - 1 + 2 rates
  cf <- coef(fit)
  expect_identical(colnames(cf), c("weight[1]", "weight[2]", "rate[1]", "rate[2]"))
  expect_equal(unname(cf["b", c("rate[1]", "rate[2]")]), comp$rate[comp$dataset == "b"])
  expect_output(print(fit), "bulkem fit: poisson mixture, 2 components, 3 datasets")
  expect_output(print(summary(fit)), "component +weight +rate")
  expect_identical(dim(vcov(fit, "a")), c(4L, 4L))
})

test_that("predict(), fitted() and mixture_density() are dpois()'s, from the components", {
  skip_if_no_bulkem()
  x <- poisson_counts()
  fit <- poisson_fit(x)
  pts <- c(0, 1, 2, 5, 8, 15, 30, 200, 1e4)
  w <- weighted_dpois(fit, "b", pts)
  expect_equal(mixture_density(fit, "b", pts), rowSums(w), tolerance = 1e-10)
  p <- predict(fit, pts, dataset = "b")
  z <- w / rowSums(w)
  ok <- rowSums(w) > 0 # (a count whose probabilities all underflow: the limit, below)
  expect_equal(unname(p$z[ok, ]), z[ok, ], tolerance = 1e-10)
  expect_equal(rowSums(p$z), rep(1, length(pts)))
  expect_identical(p$classification, max.col(p$z, ties.method = "first"))
  expect_identical(p$classification[pts == 0], 1L)
  expect_identical(p$classification[pts >= 30], rep(2L, sum(pts >= 30)))
  # as Python's, at counts
  py <- attr(fit, "python")
  z_py <- bulkem:::py_matrix(py$predict_proba("b", bulkem:::py_float_array(pts)))
  expect_equal(unname(p$z), z_py, tolerance = 1e-10)
  # a dataset's own values
  expect_identical(fitted(fit, "a"), predict(fit, x$a, dataset = "a")$classification)
  expect_equal(fitted(fit, "a", type = "prob"), predict(fit, x$a, dataset = "a")$z)
  # no probability off the counts 0, 1, 2, ...: density 0, equal shares
  off <- c(-1, 0.5, 2.5, NA, Inf)
  expect_identical(mixture_density(fit, "b", off), rep(0, length(off)))
  expect_equal(predict(fit, off, dataset = "b")$z, matrix(0.5, length(off), 2),
               ignore_attr = TRUE)
  # the density sums to 1 over the counts
  expect_equal(sum(mixture_density(fit, "c", 0:200)), 1, tolerance = 1e-12)
})

test_that("plot() draws a count dataset; mixture_sample() draws counts", {
  skip_if_no_bulkem()
  fit <- poisson_fit()
  path <- tempfile(fileext = ".png")
  on.exit(unlink(path), add = TRUE)
  grDevices::png(path, width = 700, height = 450)
  expect_identical(plot(fit, "a"), fit)
  plot(fit, "b", breaks = 10, tail = 0)
  grDevices::dev.off()
  expect_gt(file.size(path), 2000)
  draws <- mixture_sample(fit, "c", n = 2000, seed = 3)
  expect_named(draws, c("value", "component"))
  expect_true(all(draws$value >= 0 & draws$value == round(draws$value)))
  rates <- fit$components$rate[fit$components$dataset == "c"]
  expect_lt(abs(mean(draws$value[draws$component == 2]) - rates[2]), 1)
})

test_that("a dataset with a negative or non-whole value is invalid_data, with a message", {
  skip_if_no_bulkem()
  x <- poisson_counts()
  bad <- list(a = x$a, neg = c(x$b[-1], -1), frac = c(x$c[-1], 2.5))
  expect_warning(fit <- poisson_fit(bad), "2 of 3")
  s <- fit$summary
  expect_identical(s$status, c(s$status[1], "invalid_data", "invalid_data"))
  expect_true(s$status[1] %in% c("converged", "max_iter"))
  expect_match(s$message[2], "negative")
  expect_match(s$message[3], "not a whole number")
  expect_identical(unique(fit$components$dataset), "a")
  expect_error(mixture_density(fit, "neg", 1), "dataset \"neg\" has no fit", fixed = TRUE)
})

test_that("loglik_at(family = \"poisson\") is the Poisson mixture log-likelihood by dpois()", {
  skip_if_no_bulkem()
  x <- poisson_counts()
  p <- list(weight = c(0.4, 0.6), rate = c(2.5, 12))
  out <- loglik_at(x, "poisson", p, backend = "cpu")
  expect_identical(out$dataset, c("a", "b", "c"))
  expect_identical(out$status, rep("ok", 3))
  expected <- vapply(x, function(v) {
    sum(log(p$weight[1] * stats::dpois(v, p$rate[1]) + p$weight[2] * stats::dpois(v, p$rate[2])))
  }, numeric(1))
  expect_lt(rel_diff(out$loglik, unname(expected)), 1e-8)
  # at a fit's own parameters: the fit's log-likelihood
  fit <- poisson_fit(x)
  own <- lapply(fit$summary$dataset, function(id) {
    rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
    list(weight = rows$weight, rate = rows$rate)
  })
  expect_lt(rel_diff(loglik_at(unname(x), "poisson", own, backend = "cpu")$loglik,
                     fit$summary$loglik), 1e-9)
  # an invalid dataset; the message of missing params names the blocks
  expect_warning(bad <- loglik_at(list(x$a, c(1, 2, -3, 4, 5, 6, 7)), "poisson", p,
                                  backend = "cpu"), "1 of 2 datasets")
  expect_identical(bad$status, c("ok", "invalid_data"))
  expect_match(bad$message[2], "negative")
  expect_error(loglik_at(x, "poisson"), "for family = \"poisson\": weight and rate", fixed = TRUE)
})
