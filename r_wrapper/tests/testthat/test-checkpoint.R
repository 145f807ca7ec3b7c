# checkpoint = on fit_mixture(), fit_hmm(), fit_ssm() and fit_tmap(): Python's
# bulkem.fit(checkpoint = ) writes each chunk of datasets to the folder as it
# finishes; the same call again reads the finished chunks back, fits only the
# missing ones, and gives the tables of a fit without a checkpoint.

# Evaluates `code` with Python's chunks of `fits` fits (datasets x starts), so
# that a few small datasets make several chunks (Tuning.checkpoint_chunk_fits,
# as the Python tests set it). It patches Python's default Tuning, restored on
# exit, because the R fit functions take no tuning = yet (a passed Tuning, as
# the Python tests use, cannot reach bulkem.fit from R).
with_chunk_fits <- function(fits, code) {
  tuning <- reticulate::import("bulkem.tuning", convert = FALSE)
  old <- tuning$DEFAULT
  reticulate::py_set_attr(tuning, "DEFAULT",
                          old$replace(checkpoint_chunk_fits = as.integer(fits)))
  on.exit(reticulate::py_set_attr(tuning, "DEFAULT", old), add = TRUE)
  code
}

# Each finished chunk's meta.json, by chunk folder: Python writes it once, when
# it fits the chunk (with the seconds the fit took), so an unchanged file is a
# chunk read back, not fitted again.
chunk_meta <- function(dir) {
  chunks <- sort(list.files(dir, pattern = "^chunk-[0-9]{6}$"))
  stats::setNames(vapply(chunks, function(d) {
    paste(readLines(file.path(dir, d, "meta.json"), warn = FALSE), collapse = "\n")
  }, character(1)), chunks)
}

# The tables of two fits are the same (every table, every column, exactly).
expect_same_tables <- function(fit, ref) {
  expect_identical(names(fit), names(ref))
  for (name in names(ref)) {
    expect_identical(fit[[name]], ref[[name]], info = name)
  }
}

quiet <- function(code) suppressWarnings(code, classes = "bulkem_not_converged")

test_that("fit_mixture(checkpoint = ) gives the tables of a fit without, and resumes", {
  skip_if_no_bulkem()
  x <- stats::setNames(demo_data(6L, 200L, 31L)$r, paste0("d", 1:6))
  x$d4 <- c(1, NA, 2) # invalid: its chunk has one fitted dataset
  kw <- list(starts = 2, seed = 7, backend = "cpu")
  expect_warning(ref <- do.call(fit_mixture, c(list(x), kw)), "1 of 6 datasets are invalid")
  dir <- tempfile("ckpt")
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  with_chunk_fits(4L, { # 2 datasets of 2 starts a chunk: 3 chunks
    expect_warning(first <- do.call(fit_mixture, c(list(x), kw, checkpoint = dir)),
                   "1 of 6 datasets are invalid")
    expect_same_tables(first, ref)
    expect_identical(attr(first, "checkpoint"),
                     list(path = normalizePath(dir), chunks = 3L, read = 0L, fitted = 3L))
    expect_setequal(list.files(dir), c("manifest.json", sprintf("chunk-%06d", 0:2)))
    meta <- chunk_meta(dir)
    # the same call again: every chunk read back (the files are untouched), same tables
    expect_message(
      expect_warning(again <- do.call(fit_mixture, c(list(x), kw, checkpoint = dir)),
                     "1 of 6 datasets are invalid"),
      "3 of 3 chunks read back, 0 fitted", fixed = TRUE)
    expect_identical(chunk_meta(dir), meta)
    expect_same_tables(again, ref)
    expect_identical(attr(again, "checkpoint")$read, 3L)
    expect_identical(attr(again, "seed"), 7)
    # a crash after two chunks: the missing one is fitted, the others read back
    unlink(file.path(dir, "chunk-000001"), recursive = TRUE)
    expect_message(
      suppressWarnings(resumed <- do.call(fit_mixture, c(list(x), kw, checkpoint = dir))),
      "2 of 3 chunks read back, 1 fitted", fixed = TRUE)
    now <- chunk_meta(dir)
    expect_identical(now[c(1L, 3L)], meta[c(1L, 3L)])
    expect_false(identical(now[[2L]], meta[[2L]]))
    expect_same_tables(resumed, ref)
    # methods work on a fit read back from a checkpoint
    expect_equal(mixture_density(again, "d2", c(0.5, 1, 2)), mixture_density(ref, "d2", c(0.5, 1, 2)))
    expect_error(fitted(again, "d2"), "a fit read back from a checkpoint holds no values")
  })
})

test_that("a checkpoint made with other arguments or data is refused with Python's message", {
  skip_if_no_bulkem()
  x <- demo_data(4L, 150L, 32L)$r
  dir <- tempfile("ckpt")
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  quiet(fit_mixture(x, starts = 2, seed = 5, backend = "cpu", checkpoint = dir))
  err <- expect_error(
    fit_mixture(x, starts = 3, seed = 6, backend = "cpu", checkpoint = dir),
    class = "bulkem_python_error"
  )
  expect_match(conditionMessage(err), paste0(
    "checkpoint ", normalizePath(dir), " was made with other arguments: starts = 2 in the ",
    "checkpoint, 3 now; seed = 5 in the checkpoint, 6 now. Call with the same arguments to ",
    "resume it, or use another directory (or delete this one) to start afresh."),
    fixed = TRUE)
  expect_error(fit_mixture(x[1:3], starts = 2, seed = 5, backend = "cpu", checkpoint = dir),
               "was made from other data: 4 datasets there, 3 now", fixed = TRUE)
  expect_error(fit_mixture(x, starts = 2, seed = 5, backend = "cpu", checkpoint = 3),
               "`checkpoint` must be one folder path", fixed = TRUE)
  # the backend may change; seed = NULL keeps the checkpoint's seed
  expect_message(same <- quiet(fit_mixture(x, starts = 2, backend = "auto", checkpoint = dir)),
                 "1 of 1 chunk read back, 0 fitted", fixed = TRUE)
  expect_identical(attr(same, "seed"), 5)
  expect_same_tables(same, quiet(fit_mixture(x, starts = 2, seed = 5, backend = "cpu")))
  # a folder that is no checkpoint
  other <- tempfile("notes")
  dir.create(other)
  on.exit(unlink(other, recursive = TRUE), add = TRUE)
  writeLines("mine", file.path(other, "notes.txt"))
  expect_error(fit_mixture(x, starts = 2, seed = 5, backend = "cpu", checkpoint = other),
               "exists and is not a bulkem checkpoint", fixed = TRUE)
})

test_that("fit_hmm(), fit_ssm() and fit_tmap() take checkpoint = too", {
  skip_if_no_bulkem()
  set.seed(12)
  counts <- function(n) stats::rpois(n, ifelse(cumsum(stats::runif(n) < 0.1) %% 2 == 0, 1, 6))
  seqs <- list(a = list(counts(40), counts(30)), b = counts(50), c = list(counts(35)),
               d = counts(45))
  dir <- tempfile("ckpt")
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  hmm_kw <- list(seqs, 2, emission = "poisson", starts = 2, max_iter = 20, seed = 3,
                 backend = "cpu")
  ref <- quiet(do.call(fit_hmm, hmm_kw))
  with_chunk_fits(4L, {
    first <- quiet(do.call(fit_hmm, c(hmm_kw, checkpoint = file.path(dir, "hmm"))))
    expect_same_tables(first, ref)
    expect_identical(attr(first, "checkpoint")$chunks, 2L)
    expect_message(again <- quiet(do.call(fit_hmm, c(hmm_kw, checkpoint = file.path(dir, "hmm")))),
                   "2 of 2 chunks read back, 0 fitted", fixed = TRUE)
    expect_same_tables(again, ref)
    x <- counts(20)
    expect_identical(hmm_decode(again, "b", x), hmm_decode(ref, "b", x))
    # other arguments, in R's names
    expect_error(quiet(do.call(fit_hmm, c(hmm_kw[-2], components = 3,
                                          checkpoint = file.path(dir, "hmm")))),
                 "components = 2 in the checkpoint, 3 now", fixed = TRUE)
    # categorical symbols counted per chunk could differ: Python asks for symbols =
    expect_error(fit_hmm(list(c(0, 1, 1), c(1, 0, 2)), 2, checkpoint = file.path(dir, "cat")),
                 "Pass symbols = (the number of distinct symbols, or the symbols as a factor)",
                 fixed = TRUE)

    ar2 <- function(n) as.numeric(stats::filter(stats::rnorm(n), c(0.5, 0.2), "recursive"))
    series <- list(a = ar2(80), b = list(ar2(60), ar2(50)), c = ar2(70))
    ssm_kw <- list(series, "ar", order = 2, starts = 2, max_iter = 30, seed = 2, backend = "cpu")
    ref <- quiet(do.call(fit_ssm, ssm_kw))
    first <- quiet(do.call(fit_ssm, c(ssm_kw, checkpoint = file.path(dir, "ssm"))))
    expect_same_tables(first, ref)
    expect_message(again <- quiet(do.call(fit_ssm, c(ssm_kw, checkpoint = file.path(dir, "ssm")))),
                   "2 of 2 chunks read back, 0 fitted", fixed = TRUE)
    expect_same_tables(again, ref)
    expect_identical(ssm_score(again, "c", series$a), ssm_score(ref, "c", series$a))

    runs <- function(n) lapply(seq_len(n), function(i) stats::rexp(1 + i %% 4))
    traces <- list(t1 = runs(12), t2 = runs(10), t3 = runs(15))
    tmap_kw <- list(traces, orders = c(1, 2, 3), starts = 2, max_iter = 10, seed = 4,
                    backend = "cpu")
    ref <- quiet(do.call(fit_tmap, tmap_kw))
    first <- quiet(do.call(fit_tmap, c(tmap_kw, checkpoint = file.path(dir, "tmap"))))
    expect_same_tables(first, ref)
    expect_message(again <- quiet(do.call(fit_tmap, c(tmap_kw,
                                                      checkpoint = file.path(dir, "tmap")))),
                   "2 of 2 chunks read back, 0 fitted", fixed = TRUE)
    expect_same_tables(again, ref)
    expect_identical(tmap_moments(again), tmap_moments(ref))
    expect_error(quiet(do.call(fit_tmap, c(tmap_kw[names(tmap_kw) != "max_iter"],
                                           max_iter = 11,
                                           checkpoint = file.path(dir, "tmap")))),
                 "max_iter = 10 in the checkpoint, 11 now", fixed = TRUE)
  })
})
