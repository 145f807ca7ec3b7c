# fit_hmm() and the HMM result functions against the Python package's own
# calls on the same data. One configuration per emission is compiled per
# process (2 states; 3 symbols, or 2 dimensions), so every test reuses them.

# Datasets of sequences drawn in Python (numpy), and the same values in R:
# list(r = list of datasets, each a list of numeric vectors (or matrices with
# `dims` columns), py = the Python list of lists of arrays).
hmm_data <- function(lengths = list(c(40, 25, 30), c(50, 20)), dims = 0L, seed = 3L) {
  code <- paste(
    "def make(lengths, dims, seed):",
    "    import numpy as np",
    "    rng = np.random.default_rng(seed)",
    "    out = []",
    "    for lens in lengths:",
    "        seqs = []",
    "        for n in lens:",
    "            s = np.cumsum(rng.random(int(n)) < 0.1) % 2",
    "            if dims:",
    "                x = rng.normal(3.0 * s[:, None], 1.0, (int(n), int(dims)))",
    "            else:",
    "                x = np.where(s == 0, rng.integers(0, 2, int(n)), rng.integers(1, 3, int(n)))",
    "            seqs.append(np.asarray(x, dtype=np.float64))",
    "        out.append(seqs)",
    "    return out",
    sep = "\n"
  )
  env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
  make <- reticulate::py_get_item(env, "make")
  py <- reticulate::py_call(make, reticulate::r_to_py(lapply(lengths, as.list)),
                            as.integer(dims), as.integer(seed))
  r <- lapply(seq_along(lengths) - 1L, function(i) {
    d <- reticulate::py_get_item(py, i)
    lapply(seq_along(lengths[[i + 1L]]) - 1L, function(k) {
      a <- reticulate::py_get_item(d, k)
      v <- as.double(unlist(reticulate::py_to_r(a$ravel()$tolist())))
      if (dims) matrix(v, ncol = dims, byrow = TRUE) else v
    })
  })
  list(r = r, py = py)
}

expect_same_table <- function(r, py, shift = character()) {
  py_names <- unlist(reticulate::py_to_r(py$columns$tolist()))
  expect_identical(names(r), py_names)
  expect_equal(nrow(r), reticulate::py_len(py))
  for (name in py_names) {
    expected <- py_col(py, name)
    if (name %in% shift) {
      expected <- expected + 1L
    }
    if (is.numeric(expected)) {
      expect_equal(as.double(r[[name]]), as.double(expected), tolerance = 1e-12, info = name)
    } else {
      expect_identical(r[[name]], expected, info = name)
    }
  }
}

py_vector <- function(a) as.double(unlist(reticulate::py_to_r(a$ravel()$tolist())))

test_that("fit_hmm() gives the tables of the Python call on the same data and seed", {
  skip_if_no_bulkem()
  data <- hmm_data()
  fit <- fit_hmm(data$r, 2, symbols = 3, starts = 3, seed = 7, backend = "cpu")
  py <- py_bulkem()$fit(data$py,
    family = "hmm", emission = "categorical", n_symbols = 3L, n_components = 2L,
    n_starts = 3L, seed = 7L, backend = "cpu", progress = FALSE
  )
  expect_s3_class(fit, "bulkem_hmm")
  expect_named(fit, c("summary", "components", "transitions", "starts", "start_values"))
  expect_same_table(fit$summary, py$summary, shift = c("dataset", "best_start"))
  expect_same_table(fit$components, py$components, shift = "dataset")
  expect_same_table(fit$transitions, py$transitions, shift = "dataset")
  expect_same_table(fit$starts, py$starts, shift = c("dataset", "start"))
  expect_same_table(fit$start_values, py$start_values, shift = c("dataset", "start"))
  expect_identical(fit$summary$dataset, 1:2)
  expect_identical(fit$components$state, rep(1:2, 2))
  expect_identical(fit$summary$n_obs, c(95L, 70L))
  expect_true(all(fit$summary$status %in% c("converged", "max_iter")))
  expect_equal(attr(fit, "n_components"), 2L)
  expect_equal(attr(fit, "n_symbols"), 3L)
  expect_equal(attr(fit, "seed"), 7)
  expect_output(print(fit), paste0("bulkem fit: hidden Markov model, 2 states, categorical ",
                                   "emission \\(3 symbols\\), 2 datasets, backend cpu"))
  # each transition row sums to 1
  sums <- tapply(fit$transitions$prob, list(fit$transitions$dataset,
                                             fit$transitions$from_state), sum)
  expect_equal(as.vector(sums), rep(1, 4), tolerance = 1e-12)
})

test_that("a long data.frame gives the fits of the list, named by its labels", {
  skip_if_no_bulkem()
  data <- hmm_data()
  named <- stats::setNames(data$r, c("s1", "s2"))
  by_list <- fit_hmm(named, 2, symbols = 3, starts = 3, seed = 7, backend = "cpu")
  lens <- lapply(data$r, lengths)
  long <- data.frame(
    id = rep(c("s1", "s2"), vapply(lens, sum, numeric(1))),
    rec = unlist(lapply(lens, function(l) rep(c("x", "y", "z")[seq_along(l)], l))),
    obs = unlist(data$r)
  )
  by_frame <- fit_hmm(long, 2, symbols = 3, starts = 3, seed = 7, backend = "cpu",
                      dataset_col = "id", sequence_col = "rec", value_col = "obs")
  expect_identical(by_frame$summary$dataset, c("s1", "s2"))
  expect_equal(by_frame$summary$loglik, by_list$summary$loglik, tolerance = 1e-12)
  expect_equal(by_frame$transitions, by_list$transitions, tolerance = 1e-12)
  # rows of a sequence need not be together, only in time order (sequences are
  # taken in order of first appearance: x, y, z here as above)
  x_rows <- which(long$id == "s1" & long$rec == "x")
  y_rows <- which(long$id == "s1" & long$rec == "y")
  mixed <- c(rbind(x_rows[1:25], y_rows), x_rows[26:40], which(long$id == "s1" & long$rec == "z"))
  shuffled <- long[c(mixed, which(long$id == "s2")), ]
  again <- fit_hmm(shuffled, 2, symbols = 3, starts = 3, seed = 7, backend = "cpu",
                   dataset_col = "id", sequence_col = "rec", value_col = "obs")
  expect_equal(again$summary$loglik, by_list$summary$loglik, tolerance = 1e-12)
  # default column names; bad sequences are named by their labels
  bad <- rbind(
    data.frame(dataset = "ok", sequence = rep(1:3, lens[[1]]), value = unlist(data$r[[1]])),
    data.frame(dataset = "bad", sequence = c(10, 20, 20), value = c(0, 1, 7))
  )
  expect_warning(fit <- fit_hmm(bad, 2, symbols = 3, starts = 2, seed = 1, backend = "cpu"),
                 "1 of 2 datasets are invalid and were not fitted; see $summary$status",
                 fixed = TRUE)
  expect_identical(fit$summary$status[2], "invalid_data")
  expect_identical(fit$summary$message[2],
                   "sequence 20: 1 of 2 values are not symbols 0..2 (first: 7)")
  bad$sequence <- paste0("r", bad$sequence)
  fit <- suppressWarnings(fit_hmm(bad, 2, symbols = 3, starts = 2, seed = 1, backend = "cpu"))
  expect_identical(fit$summary$message[2],
                   "sequence \"r20\": 1 of 2 values are not symbols 0..2 (first: 7)")
})

test_that("sequences given by position are numbered from 1, in tables and errors", {
  skip_if_no_bulkem()
  data <- hmm_data()
  # (an NA step is a missing observation, marginalised; an infinite one is invalid)
  x <- c(data$r, list(list(c(0, 1, 2, 1), numeric(0), c(1, Inf, 2))))
  expect_warning(fit <- fit_hmm(x, 2, symbols = 3, starts = 2, seed = 1, backend = "cpu"),
                 "1 of 3 datasets are invalid")
  expect_identical(fit$summary$message[3], paste0(
    "sequence 2 is empty; sequence 3: 1 of 3 observations are infinite (NaN marks a ",
    "missing one)"))
  expect_true(is.na(fit$summary$best_start[3]))
  expect_true(is.na(fit$summary$n_iter[3]))
  expect_false(3L %in% fit$components$dataset)
  # the others are fitted exactly as without the bad one
  clean <- fit_hmm(data$r, 2, symbols = 3, starts = 2, seed = 1, backend = "cpu")
  expect_equal(fit$summary$loglik[1:2], clean$summary$loglik)
  err <- tryCatch(fit_hmm(x, 2, symbols = 3, strict = TRUE), error = function(e) e)
  expect_s3_class(err, "bulkem_python_error")
  expect_match(conditionMessage(err), "with strict = TRUE; first: sequence 2 is empty",
               fixed = TRUE)
  expect_error(hmm_decode(fit, 1, list(c(0, 1, 2), c(0, 5, 1))),
               "sequence 2: 1 of 3 values are not symbols 0..2 (first: 5)", fixed = TRUE)
  expect_error(hmm_decode(fit, 3, c(0, 1)),
               "dataset 3 has no fit: its status is \"invalid_data\".", fixed = TRUE)
  expect_error(hmm_score(fit, 4, c(0, 1)), "dataset 4 has no fit: no such dataset.",
               fixed = TRUE)
})

test_that("decode, posterior, score, sample and params are Python's", {
  skip_if_no_bulkem()
  data <- hmm_data()
  fit <- fit_hmm(list(a = data$r[[1]], b = data$r[[2]]), 2, symbols = 3, starts = 3,
                 seed = 7, backend = "cpu")
  py <- attr(fit, "python")
  s1 <- data$r[[2]][[1]]
  s1_py <- reticulate::py_get_item(reticulate::py_get_item(data$py, 1L), 0L)
  d <- hmm_decode(fit, "a", s1)
  ref <- py$decode("a", s1_py)
  expect_equal(d$logprob, reticulate::py_to_r(reticulate::py_get_item(ref, 0L)),
               tolerance = 1e-12)
  expect_identical(d$path, as.integer(py_vector(reticulate::py_get_item(ref, 1L))))
  expect_true(all(d$path %in% 1:2))
  both <- hmm_decode(fit, "a", data$r[[2]])
  expect_length(both$logprob, 2L)
  expect_identical(both$path[[1]], d$path)
  expect_equal(both$logprob[1], d$logprob)
  post <- hmm_posterior(fit, "a", s1)
  expect_identical(dim(post), c(length(s1), 2L))
  expect_identical(colnames(post), c("state_1", "state_2"))
  expect_equal(as.vector(t(post)), py_vector(py$predict_proba("a", s1_py)), tolerance = 1e-12)
  expect_equal(rowSums(post), rep(1, length(s1)), tolerance = 1e-12)
  expect_length(hmm_posterior(fit, "a", list(s1)), 1L)
  expect_equal(hmm_score(fit, "a", s1), reticulate::py_to_r(py$score("a", s1_py)),
               tolerance = 1e-12)
  expect_equal(hmm_score(fit, "b", data$r[[2]]), fit$summary$loglik[2], tolerance = 1e-9)
  drawn <- hmm_sample(fit, "b", n_sequences = 3, length = 7, seed = 4)
  expect_named(drawn, c("sequence", "step", "state", "value"))
  expect_identical(drawn$sequence, rep(1:3, each = 7))
  expect_identical(drawn$step, rep(1:7, 3))
  ref <- py$sample("b", 3L, 7L, seed = 4L)
  expect_equal(drawn$value[1:7], py_vector(reticulate::py_get_item(
    reticulate::py_get_item(ref, 0L), 0L)))
  expect_equal(drawn$state[15:21], as.integer(py_vector(reticulate::py_get_item(
    reticulate::py_get_item(ref, 1L), 2L))))
  expect_true(all(drawn$value %in% 0:2))
  p <- hmm_params(fit, "a")
  expect_named(p, c("startprob", "transmat", "emissionprob"))
  expect_identical(dim(p$transmat), c(2L, 2L))
  expect_identical(dim(p$emissionprob), c(2L, 3L))
  tr <- fit$transitions[fit$transitions$dataset == "a", ]
  expect_equal(p$transmat[cbind(tr$from_state, tr$to_state)], tr$prob, tolerance = 1e-15)
  co <- fit$components[fit$components$dataset == "a", ]
  expect_equal(p$emissionprob[, 3], co$prob_2, tolerance = 1e-15)
  expect_equal(p$startprob, co$startprob, tolerance = 1e-15)
})

test_that("init takes hmmlearn's shapes: one start, or a first dimension of starts", {
  skip_if_no_bulkem()
  data <- hmm_data()
  fit <- fit_hmm(data$r, 2, symbols = 3, starts = 2, seed = 7, backend = "cpu")
  p <- hmm_params(fit, 1)
  again <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(data$r[1], 2, symbols = 3, starts = 1, init = p, max_iter = 2, seed = 1,
            backend = "cpu"))
  sv <- again$start_values
  expect_equal(sv$startprob, p$startprob, tolerance = 1e-15)
  expect_equal(sv$prob_1, p$emissionprob[, 2], tolerance = 1e-15)
  # two starts: startprob 2 x N, transmat and emissionprob 2 x N x ...
  q <- p
  q$transmat <- rbind(c(0.5, 0.5), c(0.2, 0.8))
  q$startprob <- c(0.3, 0.7)
  two <- list(
    startprob = rbind(p$startprob, q$startprob),
    transmat = aperm(array(c(p$transmat, q$transmat), c(2, 2, 2)), c(3, 1, 2)),
    emissionprob = aperm(array(c(p$emissionprob, q$emissionprob), c(2, 3, 2)), c(3, 1, 2))
  )
  many <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(data$r[1], 2, symbols = 3, starts = 3, init = two, max_iter = 2, seed = 1,
            backend = "cpu"))
  sv <- many$start_values
  expect_equal(sv$startprob[sv$start == 2], c(0.3, 0.7))
  expect_equal(sv$startprob[sv$start == 1], p$startprob, tolerance = 1e-15)
  expect_equal(many$starts$loglik[1], again$starts$loglik[1], tolerance = 1e-12)
  expect_error(fit_hmm(data$r, 2, symbols = 3, init = list(startprob = c(0.5, 0.5))),
               paste0("init has keys c(\"startprob\"); expected exactly c(\"startprob\", ",
                      "\"transmat\", \"emissionprob\")."), fixed = TRUE)
  expect_error(fit_hmm(data$r, 2, symbols = 3, init = list(startprob = c(0.5, 0.5),
                       transmat = diag(3), emissionprob = matrix(1 / 3, 2, 3))),
               "init$transmat has shape (3, 3); expected (2, 2)", fixed = TRUE)
  expect_error(fit_hmm(data$r, 2, init = c(1, 2)), "`init` must be a named list")
})

test_that("Gaussian emissions in several dimensions: matrices in and out", {
  skip_if_no_bulkem()
  data <- hmm_data(list(c(30, 40), c(35)), dims = 2L, seed = 5L)
  fit <- fit_hmm(data$r, 2, emission = "gaussian", starts = 2, seed = 3, backend = "cpu")
  py <- py_bulkem()$fit(data$py, family = "hmm", emission = "gaussian", n_components = 2L,
                        n_starts = 2L, seed = 3L, backend = "cpu", progress = FALSE)
  expect_same_table(fit$components, py$components, shift = "dataset")
  expect_named(fit$components, c("dataset", "state", "startprob", "mean_1", "mean_2",
                                 "var_1", "var_2"))
  expect_equal(attr(fit, "n_dims"), 2L)
  # one value column per dimension in a data.frame: all columns but dataset and sequence
  m <- data$r[[1]]
  long <- data.frame(dataset = 1, sequence = rep(1:2, c(30, 40)),
                     a = c(m[[1]][, 1], m[[2]][, 1]), b = c(m[[1]][, 2], m[[2]][, 2]))
  one <- fit_hmm(long, 2, emission = "gaussian", starts = 2, seed = 3, backend = "cpu")
  expect_equal(one$summary$loglik, fit$summary$loglik[1], tolerance = 1e-12)
  named <- fit_hmm(long, 2, emission = "gaussian", starts = 2, seed = 3, backend = "cpu",
                   value_col = c("a", "b"))
  expect_equal(named$summary$loglik, fit$summary$loglik[1], tolerance = 1e-12)
  d <- hmm_decode(fit, 1, m[[1]])
  expect_length(d$path, 30L)
  ref <- attr(fit, "python")$decode(0L, reticulate::py_get_item(
    reticulate::py_get_item(data$py, 0L), 0L))
  expect_identical(d$path, as.integer(py_vector(reticulate::py_get_item(ref, 1L))))
  expect_named(hmm_sample(fit, 2, 1, 4, seed = 1),
               c("sequence", "step", "state", "value_1", "value_2"))
  p <- hmm_params(fit, 2)
  expect_identical(dim(p$means), c(2L, 2L))
  expect_equal(p$means[, 2], fit$components$mean_2[fit$components$dataset == 2])
  expect_error(hmm_decode(fit, 1, m[[1]][, 1]), "sequence 1 has shape (30, 1); expected (n, 2).",
               fixed = TRUE)
  path <- tempfile(fileext = ".png")
  grDevices::png(path, width = 800, height = 400)
  expect_identical(plot(fit, 1, sequence = 2, dim = 2), fit)
  grDevices::dev.off()
  expect_gt(file.size(path), 2000)
  expect_error(plot(fit, 1, dim = 3), "`dim` must be one of 1..2")
})

test_that("plot() draws a decoded path over one sequence", {
  skip_if_no_bulkem()
  data <- hmm_data()
  lens <- lengths(data$r[[1]])
  long <- data.frame(dataset = "d", sequence = rep(c("p", "q", "r"), lens),
                     value = unlist(data$r[[1]]))
  fit <- fit_hmm(long, 2, symbols = 3, starts = 2, seed = 2, backend = "cpu")
  path <- tempfile(fileext = ".png")
  grDevices::png(path, width = 800, height = 400)
  expect_identical(plot(fit), fit) # the first dataset with a fit, its first sequence
  plot(fit, "d", sequence = "q", main = "q", legend = FALSE)
  grDevices::dev.off()
  expect_identical(readBin(path, "raw", 4L), as.raw(c(0x89, 0x50, 0x4e, 0x47)))
  expect_error(plot(fit, "d", sequence = "zz"),
               "This dataset has no sequence labelled \"zz\"; its sequences are p, q, r.",
               fixed = TRUE)
  by_list <- fit_hmm(data$r[1], 2, symbols = 3, starts = 2, seed = 2, backend = "cpu")
  expect_error(plot(by_list, 1, sequence = 4), "`sequence` must be a position 1..3")
  expect_error(plot(by_list, 2), "dataset 2 has no fit: no such dataset.", fixed = TRUE)
})

test_that("bad arguments and data are refused in R's terms", {
  skip_if_no_bulkem()
  x <- list(c(0, 1, 2, 1, 0, 1))
  cases <- list(
    list(quote(fit_hmm(x, 0)), "components must be >= 1; got components = 0."),
    list(quote(fit_hmm(x)), "`components` (the number of hidden states) is missing"),
    list(quote(fit_hmm(x, 2, emission = "nope")),
         paste0("unknown emission \"nope\"; expected one of c(\"categorical\", ",
                "\"gaussian\", \"poisson\") (a string, e.g. emission = \"categorical\").")),
    list(quote(fit_hmm(x, 2, symbols = 0)), "symbols must be an integer >= 1; got symbols = 0."),
    list(quote(fit_hmm(x, 2, symbols = 1.5)), "`symbols` must be one whole number"),
    list(quote(fit_hmm(x, 2, params = "x")), "params = \"x\": expected letters from \"ste\""),
    list(quote(fit_hmm(x, 2, emission = c("a", "b"))), "`emission` must be one string"),
    list(quote(fit_hmm(x, 2, tol = "a")), "`tol` must be one number >= 0"),
    list(quote(fit_hmm(x, 2, starts = 0)), "starts must be >= 1"),
    list(quote(fit_hmm(x, 2, foo = 1)),
         "unexpected keyword argument(s) c(\"foo\") for family = \"hmm\""),
    list(quote(fit_hmm(x, 2, 1)), "`emission` must be one string, got 1."),
    list(quote(fit_hmm(data.frame(dataset = 1, value = 1:3), 2)),
         paste0("The data.frame has columns c(\"dataset\", \"value\"); expected a \"sequence\" ",
                "column (pass dataset_col = \"<column>\" or sequence_col = \"<column>\" to name ",
                "another).")),
    list(quote(fit_hmm(data.frame(dataset = c(1, NA), sequence = 1, value = 1:2), 2)),
         "column 'dataset' of data has 1 NA value; every row needs its dataset."),
    list(quote(fit_hmm(data.frame(dataset = 1, sequence = 1, value = c("a", "b")), 2)),
         "column 'value' of data is text (character); expected numbers."),
    list(quote(fit_hmm(list(list(1:5, "a")), 2)),
         "dataset 1, sequence 2 is text (character); expected numbers."),
    list(quote(fit_hmm(list(a = matrix(0, 3, 2)), 2)),
         "dataset 'a' is a matrix; expected a numeric vector"),
    list(quote(fit_hmm(list(a = 1:3, 2:4), 2)), "some names empty"),
    list(quote(fit_hmm(NULL, 2)), "data is NULL"),
    list(quote(fit_hmm(mean, 2)), "data is a function"),
    list(quote(fit_hmm(list(), 2)), "datasets is empty; expected at least one dataset.")
  )
  for (case in cases) {
    err <- tryCatch(eval(case[[1]]), error = function(e) conditionMessage(e))
    expect_true(is.character(err) && grepl(case[[2]], err, fixed = TRUE),
                info = paste(deparse(case[[1]]), "->", err, "| expected:", case[[2]]))
  }
  fit <- suppressWarnings(classes = "bulkem_not_converged",
    fit_hmm(hmm_data()$r, 2, symbols = 3, starts = 1, seed = 1, backend = "cpu"))
  expect_error(hmm_decode(fit, 1, list()), "`sequences` is an empty list")
  expect_error(hmm_decode(fit, 1, matrix(0, 3, 2)), "`sequences` is a matrix")
  expect_error(hmm_decode(fit, 1, list(c(0, 1), "a")), "sequence 2 is text (character)",
               fixed = TRUE)
  expect_error(hmm_sample(fit, 1, n_sequences = 0), "must be >= 1")
  expect_error(hmm_decode(fit_mixture(c(1, 2, 3, 4, 5, 6, 7), components = 1, starts = 1),
                          1, 1), "`fit` must be the result of fit_hmm(), got a bulkem_fit.",
               fixed = TRUE)
})

test_that("factors are categorical symbols: level k is symbol k, named by the level", {
  skip_if_no_bulkem()
  set.seed(4)
  rolls <- lapply(1:3, function(i) sample(1:3, 60, replace = TRUE))
  dice <- lapply(rolls, factor, levels = 1:3)
  quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")
  fit <- quiet(fit_hmm(list(dice), 2, starts = 2, seed = 1, backend = "cpu"))
  expect_identical(attr(fit, "n_symbols"), 3L) # not 4 with a never-seen 0
  expect_identical(attr(fit, "symbol_levels"), as.character(1:3))
  expect_identical(grep("^prob_", names(fit$components), value = TRUE), paste0("prob_", 1:3))
  # the same fit as the numbers 0..2
  num <- quiet(fit_hmm(list(lapply(rolls, function(r) r - 1)), 2, starts = 2, seed = 1,
                       backend = "cpu"))
  expect_equal(fit$summary$loglik, num$summary$loglik)
  expect_equal(unname(as.matrix(fit$components[, paste0("prob_", 1:3)])),
               unname(as.matrix(num$components[, paste0("prob_", 0:2)])))
  # the methods take the factor's symbols, and sample gives them back
  expect_equal(hmm_score(fit, 1, dice[[1]]), hmm_score(num, 1, rolls[[1]] - 1))
  expect_equal(hmm_decode(fit, 1, dice[[2]]), hmm_decode(num, 1, rolls[[2]] - 1))
  drawn <- hmm_sample(fit, 1, length = 20, seed = 2)
  expect_s3_class(drawn$value, "factor")
  expect_identical(levels(drawn$value), as.character(1:3))
  expect_error(hmm_score(fit, 1, factor(c("1", "9"))), "symbols the fit does not know (9)",
               fixed = TRUE)
  # letters in a long data.frame
  dna <- data.frame(dataset = 1L, sequence = rep(1:2, each = 30),
                    value = factor(sample(c("A", "C", "G", "T"), 60, replace = TRUE)))
  f2 <- quiet(fit_hmm(dna, 2, starts = 2, seed = 1, backend = "cpu"))
  expect_identical(grep("^prob_", names(f2$components), value = TRUE),
                   c("prob_A", "prob_C", "prob_G", "prob_T"))
  expect_error(fit_hmm(list(factor("a"), factor("b")), 2), "give every sequence the same levels")
  # a factor of labels is no numbers for a mixture; the advice says where it goes
  expect_error(fit_mixture(factor(c("a", "b"))), "fit_hmm(emission = \"categorical\")",
               fixed = TRUE)
})
