test_that("Python errors reach R in R's terms", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 4, 5, 6, 7), c(2, 3, 4, 5, 6, 7, 8))
  cases <- list(
    list(
      r = function() fit_mixture(x, components = 0),
      msg = "components must be >= 1; got components = 0."
    ),
    list(
      r = function() fit_mixture(x, family = "nope"),
      msg = "unknown family \"nope\"; expected one of c(\""
    ),
    list(
      r = function() fit_mixture(x, backend = "gpu"),
      msg = "unknown backend \"gpu\"; expected one of c(\"auto\", \"cpu\", \"cuda\")."
    ),
    list(
      r = function() fit_mixture(x, tol = -1),
      msg = "tol must be a number >= 0; got tol = -1.0."
    ),
    list(
      r = function() fit_mixture(x, seed = -3),
      msg = "seed must be >= 0; got seed = -3."
    ),
    list(
      r = function() fit_mixture(x, starts = 1, init = list(
        weight = rbind(c(.5, .5), c(.5, .5)), mu = rbind(1:2, 1:2), lambda = rbind(1:2, 1:2)
      )),
      msg = "init gives 2 starts but starts = 1; set starts >= 2."
    ),
    list(
      r = function() fit_mixture(x, init = list(mu = c(1, 2))),
      msg = "init has keys c(\"mu\"); expected exactly c(\"weight\", \"mu\", \"lambda\")."
    ),
    list(
      r = function() fit_mixture(list(c(1, NA, 3, 4, 5, 6, 7)), strict = TRUE),
      msg = paste0("1 invalid dataset(s) with strict = TRUE; first: 1 of 7 values is NaN ",
                   "or infinite.")
    ),
    list(
      r = function() fit_mixture(data.frame(id = 1:7, value = 1:7)),
      msg = paste0("The data.frame has columns c(\"id\", \"value\"); expected a \"dataset\" ",
                   "column naming the dataset of each row. Pass dataset_col = \"<column>\" ",
                   "to name another.")
    ),
    list(
      r = function() fit_mixture(list()),
      msg = "datasets is empty; expected at least one dataset."
    )
  )
  for (case in cases) {
    err <- tryCatch(case$r(), error = function(e) e)
    expect_s3_class(err, "bulkem_python_error")
    expect_true(startsWith(conditionMessage(err), case$msg),
                info = paste(conditionMessage(err), "| expected:", case$msg))
  }
  # the data.frame's columns can be named
  long <- data.frame(id = rep(1:2, each = 7), x = unlist(x))
  named <- suppressWarnings(classes = "bulkem_not_converged",
    fit_mixture(long, dataset_col = "id", value_col = "x", starts = 1, seed = 1,
                backend = "cpu"))
  expect_identical(named$summary$dataset, 1:2)
})

test_that("bulkem() says it in its own argument names", {
  skip_if_no_bulkem()
  x <- list(c(1, 2, 3, 4, 5, 6, 7))
  expect_error(bulkem(x, num.components = 0),
               "num.components must be >= 1; got num.components = 0.", fixed = TRUE)
  expect_error(bulkem(x, random.inits = 0), "random.inits must be >= 1", fixed = TRUE)
  expect_error(bulkem(x, max.iters = -1), "max.iters must be >= 0", fixed = TRUE)
  expect_error(bulkem(x, epsilon = -1), "epsilon must be a number >= 0", fixed = TRUE)
  expect_error(bulkem(x, epsilon = "a"), "`epsilon` must be one number >= 0", fixed = TRUE)
  expect_error(bulkem(x, num.components = 1.5), "`num.components` must be one whole number",
               fixed = TRUE)
  expect_error(bulkem(data.frame(id = 1:7, value = 1:7)),
               "expected a \"dataset\" column naming the dataset of each row. Name that column \"dataset\".",
               fixed = TRUE)
  expect_warning(bulkem(list(1:9, c(1, NA)), seed = 1),
                 "1 of 2 datasets are invalid and were not fitted; their fit_success is FALSE",
                 fixed = TRUE)
  gpu <- reticulate::import("bulkem.engines.cuda", convert = FALSE)$available()
  if (!isTRUE(reticulate::py_to_r(reticulate::py_get_item(gpu, 0L)))) {
    err <- tryCatch(bulkem(x, use.gpu = TRUE), error = function(e) conditionMessage(e))
    expect_match(err, "^use.gpu = TRUE needs a usable NVIDIA GPU, but ")
    expect_match(err, "Use use.gpu = FALSE (or NA: the GPU when there is one) to run on the CPU.",
                 fixed = TRUE)
    expect_false(grepl("backend|numba", err))
  }
})

test_that("datasets are numbered from 1 and quoted as R quotes, in errors too", {
  skip_if_no_bulkem()
  x <- list(c(0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4), c(1, 2))
  expect_warning(fit <- fit_mixture(x, starts = 1, seed = 1, backend = "cpu"), "1 of 2")
  expect_error(mixture_density(fit, 2, 1),
               "dataset 2 has no fit: its status is \"invalid_data\".", fixed = TRUE)
  expect_error(mixture_density(fit, 3, 1), "dataset 3 has no fit: no such dataset.", fixed = TRUE)
  named <- suppressWarnings(fit_mixture(list(a = x[[1]], b = x[[2]]), starts = 1, seed = 1,
                                        backend = "cpu"))
  err <- tryCatch(mixture_density(named, "zzz", 1), error = function(e) conditionMessage(e))
  expect_identical(err, "dataset \"zzz\" has no fit: no such dataset.")
  m <- bulkem:::r_message
  expect_identical(m("dataset 0 has shape (2, 3); but dataset 11 has"),
                   "dataset 1 has shape (2, 3); but dataset 12 has")
  expect_identical(m("dataset 0 holds", list(ids = "label")), "dataset 0 holds")
  expect_identical(m("1 of 3 datasets are invalid"), "1 of 3 datasets are invalid")
  expect_identical(m("the user's 'x' and the family's 'y'"), "the user's \"x\" and the family's \"y\"")
  expect_identical(m("Convert the column to numbers (pandas.to_numeric) before fitting."),
                   "Convert it to numbers (as.numeric()) before fitting.")
})

test_that("bulkem() and fit_mixture() refuse text, factors and TRUE/FALSE alike", {
  skip_if_no_bulkem()
  ok <- c(1, 2, 3, 4, 5, 6, 7)
  bad <- list(
    text = c("1.5", "2", "3", "4", "5", "6", "7"),
    factor = factor(c(1, 2, 3, 4, 5, 6, 7)),
    logical = c(TRUE, FALSE, TRUE, TRUE, FALSE, TRUE, TRUE)
  )
  for (kind in names(bad)) {
    a <- tryCatch(fit_mixture(list(ok, bad[[kind]])), error = function(e) conditionMessage(e))
    b <- tryCatch(bulkem(list(ok, bad[[kind]])), error = function(e) conditionMessage(e))
    expect_identical(a, b, info = kind)
    expect_match(a, "^dataset 2 is .*; expected numbers. Convert it with as.numeric\\(")
  }
  expect_error(fit_mixture(data.frame(dataset = 1, value = as.character(ok))),
               "column 'value' of datasets is text (character); expected numbers.", fixed = TRUE)
  expect_error(bulkem(list(a = c("x", "y"))), "dataset 'a' is text (character)", fixed = TRUE)
})

test_that("counts and seeds must be whole numbers and go to Python as integers", {
  skip_if_no_bulkem()
  x <- c(1, 2, 3, 4, 5, 6, 7, 8, 9)
  expect_error(fit_mixture(x, components = 2.5), "`components` must be one whole number")
  expect_error(fit_mixture(x, starts = NA), "`starts` must be one whole number")
  expect_error(fit_mixture(x, seed = "1"), "`seed` must be one whole number")
  expect_error(fit_mixture(x, max_iter = c(1, 2)), "`max_iter` must be one whole number")
  expect_identical(bulkem:::py_int(3, "n"), 3L)
  big <- bulkem:::py_int(2^40, "seed")
  expect_identical(reticulate::py_str(big), "1099511627776")
  fit <- fit_mixture(x, components = 1, starts = 1, seed = 2^40, backend = "cpu")
  expect_equal(attr(fit, "seed"), 2^40)
})

test_that("R-side structure errors are clear", {
  skip_if_no_bulkem()
  expect_error(fit_mixture(list(a = 1:9, 2:10)), "some names empty")
  expect_error(fit_mixture(list(a = 1:9, a = 2:10)), "duplicated names")
  expect_error(fit_mixture(matrix(1:10, 5)), "is a matrix")
  expect_error(fit_mixture(NULL), "datasets is NULL")
  expect_error(fit_mixture(mean), "datasets is a function")
  expect_error(fit_mixture(1:9, init = 1), "`init` must be a named list")
})

test_that("NA values make that dataset invalid_data and the rest is fitted", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 200L, 13L)
  x <- data$r
  x[[2]][5] <- NA
  expect_warning(
    fit <- fit_mixture(x, starts = 2, seed = 6, backend = "cpu"),
    "1 of 3 datasets are invalid"
  )
  s <- fit$summary
  expect_identical(s$status[2], "invalid_data")
  expect_match(s$message[2], "1 of 200 values is NaN or infinite", fixed = TRUE)
  expect_true(all(s$status[-2] %in% c("converged", "max_iter")))
  expect_false(2L %in% fit$components$dataset)
  expect_true(is.na(s$best_start[2]))
  expect_true(is.na(s$n_iter[2]))
  # the other datasets are fitted exactly as without the bad one
  clean <- fit_mixture(x[-2], starts = 2, seed = 6, backend = "cpu")
  expect_equal(s$loglik[-2], clean$summary$loglik)
  # same through the original interface; integer NA and an all-NA dataset too
  expect_warning(
    fits <- bulkem(list(x[[1]], c(1L, NA, 3L, 4L, 5L, 6L, 7L), c(NA, NA)), seed = 6),
    "2 of 3 datasets are invalid"
  )
  expect_false(fits[[2]]$fit_success)
  expect_true(all(is.na(fits[[2]]$mu)))
  expect_length(fits[[3]]$lambda, 2L)
  expect_true(is.na(fits[[3]]$loglik))
  expect_true(all(is.finite(fits[[1]]$mu)))
  # NaN, Inf and non-positive values are treated alike
  expect_warning(
    f2 <- suppressWarnings(classes = "bulkem_not_converged",
      fit_mixture(list(c(1, 2, Inf, 4, 5, 6), c(1, 2, -3, 4, 5, 6), x[[1]]), starts = 1)),
    "2 of 3 datasets are invalid"
  )
  expect_match(f2$summary$message[1], "1 of 6 values is NaN or infinite", fixed = TRUE)
  expect_match(f2$summary$message[2], "1 of 6 values is <= 0", fixed = TRUE)
})

test_that("a factor dataset column comes back as that factor, datasets in level order", {
  skip_if_no_bulkem()
  data <- demo_data(3L, 100L, 13L)
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  long <- data.frame(
    dataset = factor(rep(c("b", "c", "a"), each = 100), levels = c("a", "b", "c", "unused")),
    value = unlist(data$r)
  )
  fit <- quiet(fit_mixture(long, starts = 2, seed = 3, backend = "cpu"))
  expect_s3_class(fit$summary$dataset, "factor")
  expect_identical(levels(fit$summary$dataset), c("a", "b", "c", "unused"))
  expect_identical(as.character(fit$summary$dataset), c("a", "b", "c"))
  expect_s3_class(fit$components$dataset, "factor")
  # the same fits as the datasets by name
  named <- quiet(fit_mixture(list(a = data$r[[3]], b = data$r[[1]], c = data$r[[2]]),
                             starts = 2, seed = 3, backend = "cpu"))
  expect_equal(fit$summary$loglik, named$summary$loglik)
  expect_equal(fit$components$mu, named$components$mu)
  expect_equal(mixture_density(fit, "c", 1:3), mixture_density(named, "c", 1:3))
  pdf(NULL)
  expect_identical(plot(fit, dataset = "b"), fit) # the Python id of a level
  dev.off()
  # text: first appearance, as before, and text back
  long$dataset <- as.character(long$dataset)
  txt <- quiet(fit_mixture(long, starts = 2, seed = 3, backend = "cpu"))
  expect_identical(txt$summary$dataset, c("b", "c", "a"))
  expect_equal(txt$summary$loglik, named$summary$loglik[c(2, 3, 1)])
  expect_error(mixture_density(fit, "zz", 1), "dataset \"zz\" has no fit: no such dataset.",
               fixed = TRUE)
})

test_that("a long data.frame with a text id crosses to Python as integer codes (fast)", {
  skip_if_no_bulkem()
  set.seed(1)
  n <- 2000L
  long <- data.frame(dataset = rep(sprintf("g%04d", seq_len(n)), each = 200L),
                     value = rgamma(n * 200L, 2))
  took <- system.time(data <- bulkem:::py_datasets(long))[["elapsed"]]
  expect_lt(took, 10) # 400,000 strings as Python objects took about a minute
  expect_identical(data$ids$levels, sprintf("g%04d", seq_len(n)))
  expect_identical(reticulate::py_to_r(data$py$dtypes$astype("str")$tolist()),
                   c("int64", "float64"))
})
