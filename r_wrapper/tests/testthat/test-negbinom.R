# family = "negbinom": mixtures of negative binomial distributions of overdispersed counts
# (weight, size, mu per component). fit_mixture(), the density the methods compute in R from
# the components table, and loglik_at(), against R's dnbinom().

negbinom_counts <- function() {
  set.seed(23)
  stats::setNames(lapply(1:2, function(i) {
    c(stats::rnbinom(200, size = 2, mu = 3), stats::rnbinom(100, size = 6, mu = 40))
  }), c("a", "b"))
}

weighted_dnbinom <- function(fit, id, x) {
  rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
  rows <- rows[order(rows$component), , drop = FALSE]
  sapply(seq_len(nrow(rows)), function(k) {
    rows$weight[k] * stats::dnbinom(x, size = rows$size[k], mu = rows$mu[k])
  })
}

test_that("fit_mixture(family = \"negbinom\") fits overdispersed counts, by dnbinom()", {
  skip_if_no_bulkem()
  x <- negbinom_counts()
  fit <- suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(x, family = "negbinom", components = 2, starts = 4, seed = 2,
                backend = "cpu"))
  expect_identical(attr(fit, "family"), "negbinom")
  expect_named(fit$components, c("dataset", "component", "weight", "size", "mu"))
  comp <- fit$components
  expect_true(all(comp$mu[comp$component == 1] < comp$mu[comp$component == 2]))
  for (id in names(x)) {
    expected <- sum(log(rowSums(weighted_dnbinom(fit, id, x[[id]]))))
    got <- fit$summary$loglik[fit$summary$dataset == id]
    expect_lt(abs(got - expected) / abs(expected), 1e-10)
    p <- predict(fit, dataset = id, newdata = 0:5)$z
    w <- weighted_dnbinom(fit, id, 0:5)
    expect_equal(unname(as.matrix(p)), unname(w / rowSums(w)), tolerance = 1e-10)
  }
  expect_identical(attr(logLik(fit), "df"), 5L) # 2 weights - 1 + 2 sizes + 2 means
  at <- loglik_at(x, "negbinom", list(weight = c(0.6, 0.4), size = c(2, 6), mu = c(3, 40)),
                  backend = "cpu")
  expected <- sum(log(0.6 * stats::dnbinom(x$a, size = 2, mu = 3) +
                        0.4 * stats::dnbinom(x$a, size = 6, mu = 40)))
  expect_lt(abs(at$loglik[1] - expected) / abs(expected), 1e-10)
  bad <- suppressWarnings(fit_mixture(list(c(1, 2, 2.5, 4, 5, 6, 7)), family = "negbinom",
                                      components = 1, backend = "cpu"))
  expect_identical(bad$summary$status, "invalid_data")
  expect_match(bad$summary$message, "not a whole number")
})
