# family = "lognormal" (weight, meanlog, varlog per component: dlnorm(x, meanlog,
# sqrt(varlog))) and family = "gamma" (weight, shape, rate: dgamma(x, shape, rate)):
# fit_mixture(), the methods that compute the density in R from the components table
# (predict, fitted, mixture_density, plot), mixture_sample() and loglik_at(), against R's
# dlnorm() and dgamma().

# Three datasets of 300 positive values each, of two components (R's random numbers).
positive_values <- function(family) {
  set.seed(if (family == "lognormal") 23 else 29)
  draw <- if (family == "lognormal") {
    function() c(stats::rlnorm(150, 0, 0.3), stats::rlnorm(150, 1.5, 0.4))
  } else {
    function() c(stats::rgamma(150, shape = 4, rate = 4), stats::rgamma(150, shape = 30, rate = 6))
  }
  stats::setNames(lapply(1:3, function(i) draw()), c("a", "b", "c"))
}

positive_fit <- function(family, x = positive_values(family), ...) {
  suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(x, family = family, components = 2, starts = 3, max_iter = 500, seed = 4,
                backend = "cpu", ...))
}

# The parameter names of each family, after weight.
positive_params <- list(lognormal = c("meanlog", "varlog"), gamma = c("shape", "rate"))

# One component's density by R's own functions, from its two parameters.
r_density <- function(family, x, p1, p2) {
  if (family == "lognormal") {
    stats::dlnorm(x, meanlog = p1, sdlog = sqrt(p2))
  } else {
    stats::dgamma(x, shape = p1, rate = p2)
  }
}

# Each component's weighted density w_k f_k(x) (a column each) of one dataset of a fit,
# components in table order.
weighted_r_density <- function(fit, id, x) {
  family <- attr(fit, "family")
  rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
  rows <- rows[order(rows$component), , drop = FALSE]
  nm <- positive_params[[family]]
  sapply(seq_len(nrow(rows)), function(k) {
    rows$weight[k] * r_density(family, x, rows[[nm[1]]][k], rows[[nm[2]]][k])
  })
}

rel_diff <- function(a, b) max(abs(a - b) / abs(b))

for (family in c("lognormal", "gamma")) {
  nm <- positive_params[[family]]

  test_that(paste0("fit_mixture(family = \"", family, "\"): parameters, loglik by R's density"), {
    skip_if_no_bulkem()
    x <- positive_values(family)
    fit <- positive_fit(family, x, se = TRUE)
    expect_s3_class(fit, "bulkem_fit")
    expect_identical(attr(fit, "family"), family)
    expect_identical(fit$summary$dataset, c("a", "b", "c"))
    expect_true(all(fit$summary$status %in% c("converged", "max_iter")))
    expect_named(fit$components, c("dataset", "component", "weight", nm, "se_weight",
                                   paste0("se_", nm)))
    comp <- fit$components
    expect_identical(comp$component, rep(1:2, 3))
    one <- comp$component == 1
    if (family == "lognormal") { # numbered by meanlog: the true 0 (sd 0.3), 1.5 (sd 0.4)
      expect_true(all(abs(comp$meanlog[one] - 0) < 0.1))
      expect_true(all(abs(comp$meanlog[!one] - 1.5) < 0.15))
      expect_true(all(abs(sqrt(comp$varlog[one]) - 0.3) < 0.08))
      expect_true(all(abs(sqrt(comp$varlog[!one]) - 0.4) < 0.1))
    } else { # numbered by the mean shape / rate: the true 1 (shape 4), 5 (shape 30)
      mean <- comp$shape / comp$rate
      expect_true(all(abs(mean[one] - 1) < 0.15))
      expect_true(all(abs(mean[!one] - 5) < 0.4))
      expect_true(all(comp$shape[one] < comp$shape[!one]))
    }
    expect_true(all(abs(comp$weight - 0.5) < 0.1))
    expect_true(all(is.finite(comp[[paste0("se_", nm[1])]]) & comp[[paste0("se_", nm[1])]] > 0))
    # the log-likelihood is that of the values under the fitted mixture, by R's density
    for (id in names(x)) {
      expected <- sum(log(rowSums(weighted_r_density(fit, id, x[[id]]))))
      expect_lt(rel_diff(fit$summary$loglik[fit$summary$dataset == id], expected), 1e-8)
    }
    expect_identical(attr(logLik(fit), "df"), 5L) # 2 weights - 1 + 2 x 2 parameters
    cf <- coef(fit)
    expect_identical(colnames(cf), c("weight[1]", "weight[2]", paste0(rep(nm, each = 2),
                                                                      c("[1]", "[2]"))))
    expect_equal(unname(cf["b", paste0(nm[2], c("[1]", "[2]"))]),
                 comp[[nm[2]]][comp$dataset == "b"])
    expect_output(print(fit), paste0("bulkem fit: ", family, " mixture, 2 components, 3 datasets"))
    expect_output(print(summary(fit)), paste0("component +weight +", nm[1], " +", nm[2]))
    expect_identical(dim(vcov(fit, "a")), c(6L, 6L))
    expect_identical(rownames(vcov(fit, "a"))[1:3], c("weight_1", paste0(nm, "_1")))
  })

  test_that(paste0("predict(), fitted() and mixture_density() of \"", family,
                   "\" are R's densities, from the components"), {
    skip_if_no_bulkem()
    x <- positive_values(family)
    fit <- positive_fit(family, x)
    pts <- c(1e-4, 0.05, 0.3, 1, 2, 4.5, 8, 20, 100)
    w <- weighted_r_density(fit, "b", pts)
    expect_equal(mixture_density(fit, "b", pts), rowSums(w), tolerance = 1e-10)
    p <- predict(fit, pts, dataset = "b")
    expect_equal(unname(p$z), w / rowSums(w), tolerance = 1e-10)
    expect_equal(rowSums(p$z), rep(1, length(pts)))
    expect_identical(p$classification, max.col(p$z, ties.method = "first"))
    expect_identical(p$classification[pts %in% c(0.3, 1)], c(1L, 1L))
    expect_identical(p$classification[pts %in% c(8, 20)], c(2L, 2L))
    # as Python's, here and where every density underflows (the limit of the posterior)
    py <- attr(fit, "python")
    far <- c(pts, 1e-300, 1e-30, 1e4, 1e30, 1e300)
    z_py <- bulkem:::py_matrix(py$predict_proba("b", bulkem:::py_float_array(far)))
    expect_equal(unname(predict(fit, far, dataset = "b")$z), z_py, tolerance = 1e-10)
    ld_py <- bulkem:::py_numbers(py$score_samples("b", bulkem:::py_float_array(pts)))
    expect_equal(log(mixture_density(fit, "b", pts)), ld_py, tolerance = 1e-10)
    # a dataset's own values
    expect_identical(fitted(fit, "a"), predict(fit, x$a, dataset = "a")$classification)
    expect_equal(fitted(fit, "a", type = "prob"), predict(fit, x$a, dataset = "a")$z)
    # no density at x <= 0 (nor NA): density 0, equal shares
    off <- c(-1, 0, NA)
    expect_identical(mixture_density(fit, "b", c(off, Inf)), rep(0, 4))
    expect_equal(predict(fit, off, dataset = "b")$z, matrix(0.5, length(off), 2),
                 ignore_attr = TRUE)
    # the density integrates to 1
    total <- stats::integrate(function(v) mixture_density(fit, "c", v), 0, Inf,
                              rel.tol = 1e-10)$value
    expect_equal(total, 1, tolerance = 1e-7)
  })

  test_that(paste0("plot() draws a \"", family, "\" dataset; mixture_sample() draws values > 0"), {
    skip_if_no_bulkem()
    fit <- positive_fit(family)
    path <- tempfile(fileext = ".png")
    on.exit(unlink(path), add = TRUE)
    grDevices::png(path, width = 700, height = 450)
    expect_identical(plot(fit, "a"), fit)
    plot(fit, "b", breaks = 20, tail = 0)
    grDevices::dev.off()
    expect_gt(file.size(path), 2000)
    draws <- mixture_sample(fit, "c", n = 4000, seed = 3)
    expect_named(draws, c("value", "component"))
    expect_true(all(draws$value > 0))
    rows <- fit$components[fit$components$dataset == "c", , drop = FALSE]
    second <- draws$value[draws$component == 2]
    if (family == "lognormal") {
      expect_lt(abs(mean(log(second)) - rows$meanlog[2]), 0.05)
    } else {
      expect_lt(abs(mean(second) - rows$shape[2] / rows$rate[2]), 0.1)
    }
  })

  test_that(paste0("\"", family, "\": a dataset with a value <= 0 or NA is invalid_data"), {
    skip_if_no_bulkem()
    x <- positive_values(family)
    bad <- list(a = x$a, zero = c(x$b[-1], 0), neg = c(x$c[-1], -2), na = c(x$c[-1], NA))
    expect_warning(fit <- positive_fit(family, bad), "3 of 4")
    s <- fit$summary
    expect_identical(s$status, c(s$status[1], rep("invalid_data", 3)))
    expect_true(s$status[1] %in% c("converged", "max_iter"))
    expect_match(s$message[2], "1 of 300 values is <= 0", fixed = TRUE)
    expect_match(s$message[3], "<= 0", fixed = TRUE)
    expect_match(s$message[4], "NaN", fixed = TRUE)
    expect_identical(unique(fit$components$dataset), "a")
    expect_error(mixture_density(fit, "zero", 1), "dataset \"zero\" has no fit", fixed = TRUE)
    # init of the family's blocks; a wrong form names them
    start <- stats::setNames(list(c(0.5, 0.5), c(0.1, 1.4), c(0.1, 0.2)), c("weight", nm))
    if (family == "gamma") start[nm] <- list(c(5, 30), c(5, 6))
    init_fit <- positive_fit(family, x["a"], init = start)
    expect_identical(init_fit$start_values[init_fit$start_values$start == 1, nm[1]], start[[2]])
    expect_error(fit_mixture(x, family = family, init = 1),
                 paste0("elements weight, ", nm[1], " and ", nm[2]), fixed = TRUE)
  })

  test_that(paste0("loglik_at(family = \"", family, "\") is the mixture log-likelihood by R's ",
                   "density"), {
    skip_if_no_bulkem()
    x <- positive_values(family)
    p <- if (family == "lognormal") {
      list(weight = c(0.4, 0.6), meanlog = c(0.1, 1.4), varlog = c(0.1, 0.2))
    } else {
      list(weight = c(0.4, 0.6), shape = c(3, 25), rate = c(3.5, 5))
    }
    out <- loglik_at(x, family, p, backend = "cpu")
    expect_identical(out$dataset, c("a", "b", "c"))
    expect_identical(out$status, rep("ok", 3))
    expect_identical(out$n_obs, rep(300L, 3))
    expected <- vapply(x, function(v) {
      sum(log(p$weight[1] * r_density(family, v, p[[nm[1]]][1], p[[nm[2]]][1]) +
                p$weight[2] * r_density(family, v, p[[nm[1]]][2], p[[nm[2]]][2])))
    }, numeric(1))
    expect_lt(rel_diff(out$loglik, unname(expected)), 1e-8)
    # at a fit's own parameters: the fit's log-likelihood
    fit <- positive_fit(family, x)
    own <- lapply(fit$summary$dataset, function(id) {
      rows <- fit$components[fit$components$dataset == id, , drop = FALSE]
      stats::setNames(list(rows$weight, rows[[nm[1]]], rows[[nm[2]]]), c("weight", nm))
    })
    expect_lt(rel_diff(loglik_at(unname(x), family, own, backend = "cpu")$loglik,
                       fit$summary$loglik), 1e-9)
    # an invalid dataset; the message of missing params names the blocks
    expect_warning(bad <- loglik_at(list(x$a, c(1, 2, -3, 4, 5, 6, 7)), family, p,
                                    backend = "cpu"), "1 of 2 datasets")
    expect_identical(bad$status, c("ok", "invalid_data"))
    expect_match(bad$message[2], "<= 0", fixed = TRUE)
    expect_error(loglik_at(x, family),
                 paste0("for family = \"", family, "\": weight, ", nm[1], " and ", nm[2]),
                 fixed = TRUE)
  })
}

test_that("fit_mixture() names the mixture families when refusing another", {
  expect_error(fit_mixture(1:10, family = "hmm"),
               "\"poisson\", \"negbinom\", \"lognormal\" or \"gamma\"", fixed = TRUE)
})
