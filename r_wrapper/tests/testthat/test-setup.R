test_that("bulkem_available() answers TRUE or FALSE with a reason", {
  ok <- bulkem_available()
  expect_type(ok, "logical")
  expect_length(ok, 1L)
  expect_type(attr(ok, "reason"), "character")
  expect_true(nzchar(attr(ok, "reason")))
  expect_message(bulkem_available(verbose = TRUE), attr(ok, "reason"), fixed = TRUE)
})

test_that("bulkem is available wherever the test runner says it must be", {
  # scripts/test_r.sh sets BULKEM_REQUIRE_PYTHON=1 after checking, outside R,
  # that `import bulkem` works in the Python named by RETICULATE_PYTHON.
  skip_if(!nzchar(Sys.getenv("BULKEM_REQUIRE_PYTHON")), "BULKEM_REQUIRE_PYTHON is not set")
  ok <- bulkem_available()
  expect_true(isTRUE(ok), info = attr(ok, "reason"))
  expect_match(attr(ok, "reason"), "found in the Python at")
  expect_equal(
    normalizePath(attr(ok, "python")),
    normalizePath(Sys.getenv("RETICULATE_PYTHON", attr(ok, "python")))
  )
})

test_that("install_bulkem() is told where the source is, or says how to", {
  spec <- bulkem:::bulkem_pip_spec
  empty <- tempfile("nosrc")
  dir.create(empty)
  expect_error(spec(empty), "holds no pyproject.toml")
  src <- tempfile("src")
  dir.create(src)
  writeLines(c("[project]", 'name = "bulkem"'), file.path(src, "pyproject.toml"))
  expect_equal(spec(src), normalizePath(src))
  expect_equal(spec(src, extras = c("r", "cuda")), paste0(normalizePath(src), "[r,cuda]"))
  expect_equal(bulkem:::find_source_tree(file.path(src)), normalizePath(src))
  expect_equal(spec("bulkem==0.1.0"), "bulkem==0.1.0")
  withr_env <- Sys.getenv("BULKEM_SOURCE", unset = NA)
  Sys.setenv(BULKEM_SOURCE = src)
  on.exit(if (is.na(withr_env)) Sys.unsetenv("BULKEM_SOURCE") else Sys.setenv(BULKEM_SOURCE = withr_env))
  expect_equal(spec(), normalizePath(src))
})

test_that("install_bulkem() runs Python without R's LD_LIBRARY_PATH, PYTHONPATH, PYTHONHOME", {
  clean <- bulkem:::with_clean_python_env
  vars <- c("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")
  old <- Sys.getenv(vars, unset = NA, names = TRUE)
  on.exit({
    Sys.unsetenv(vars)
    keep <- old[!is.na(old)]
    if (length(keep)) do.call(Sys.setenv, as.list(keep))
  }, add = TRUE)
  Sys.setenv(LD_LIBRARY_PATH = "/usr/lib/R/lib:/usr/lib/x86_64-linux-gnu", PYTHONPATH = "/x")
  Sys.unsetenv("PYTHONHOME")
  inside <- clean(Sys.getenv(vars, unset = NA, names = TRUE))
  expect_true(all(is.na(inside)))
  child <- clean(system2("sh", c("-c", shQuote("echo \"[$LD_LIBRARY_PATH][$PYTHONPATH]\"")),
                         stdout = TRUE))
  expect_identical(child, "[][]")
  # restored afterwards, also after an error
  expect_identical(Sys.getenv("PYTHONPATH"), "/x")
  expect_error(clean(stop("boom")), "boom")
  expect_identical(Sys.getenv("LD_LIBRARY_PATH"), "/usr/lib/R/lib:/usr/lib/x86_64-linux-gnu")
  expect_true(is.na(Sys.getenv("PYTHONHOME", unset = NA)))
})

test_that("install_bulkem() checks that its Python can run pip before installing", {
  problem <- bulkem:::pip_problem
  fake <- tempfile("python")
  writeLines(c("#!/bin/sh", "echo 'ImportError: undefined symbol: _PyModule_Add' >&2", "exit 1"),
             fake)
  Sys.chmod(fake, "755")
  expect_identical(problem(fake), "ImportError: undefined symbol: _PyModule_Add")
  python <- Sys.getenv("RETICULATE_PYTHON")
  skip_if(!nzchar(python), "RETICULATE_PYTHON is not set")
  # Under R's LD_LIBRARY_PATH this may fail (a pyenv Python loading the
  # system's libpython); in the clean environment it must work.
  expect_null(bulkem:::with_clean_python_env(problem(python)))
})

test_that("in the bulkem repository reticulate is not told it is a Poetry project", {
  root <- bulkem:::find_source_tree(getwd())
  skip_if(is.null(root), "not inside the bulkem repository")
  seen <- withr_local_wd(root, bulkem:::without_false_poetry(getOption("reticulate.poetry.project")))
  expect_identical(seen, tempdir())
  expect_null(getOption("reticulate.poetry.project"))
  old <- options(reticulate.poetry.project = "/somewhere")
  on.exit(options(old), add = TRUE)
  expect_identical(bulkem:::without_false_poetry(getOption("reticulate.poetry.project")),
                   "/somewhere")
})

test_that("a folder named bulkem in the working directory does not hide the Python module", {
  skip_if_no_bulkem()
  # A new R session (the module is imported once per session), started in a
  # folder holding bulkem/ as bulkem.Rcheck/ does: Python would take that
  # folder for a namespace package named bulkem, without fit().
  dir <- tempfile("wd")
  dir.create(file.path(dir, "bulkem"), recursive = TRUE)
  on.exit(unlink(dir, recursive = TRUE), add = TRUE)
  script <- file.path(dir, "check.R")
  writeLines(c(
    "library(bulkem)",
    "ok <- bulkem_available()",
    "cat('AVAILABLE', isTRUE(ok), attr(ok, 'reason'), '\\n')",
    "fit <- fit_mixture(list(c(1.2, 0.8, 1.1, 3.5, 2.9, 3.1, 0.9, 3.3)), starts = 2,",
    "                   seed = 1, backend = 'cpu')",
    "cat('STATUS', fit$summary$status, '\\n')"
  ), script)
  python <- attr(bulkem_available(), "python")
  out <- withr_local_wd(dir, suppressWarnings(system2(
    file.path(R.home("bin"), "Rscript"), c("--vanilla", "check.R"),
    stdout = TRUE, stderr = TRUE,
    env = c(paste0("RETICULATE_PYTHON=", python),
            paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)))
  )))
  expect_true(any(grepl("^AVAILABLE TRUE bulkem .* found in the Python at", out)),
    info = paste(out, collapse = "\n"))
  expect_true(any(grepl("^STATUS (converged|max_iter)", out)), info = paste(out, collapse = "\n"))
  expect_false(any(grepl("too old or incomplete", out)))
})

test_that("with BULKEM_REQUIRE_PYTHON=1 a missing Python side is an error, not FALSE", {
  # (what makes the examples fail under R CMD check instead of skipping)
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(c(
    "ok <- tryCatch(bulkem::bulkem_available(), error = function(e) conditionMessage(e))",
    "cat('ANSWER', if (is.logical(ok)) format(ok) else ok, '\\n')"
  ), script)
  run <- function(require) {
    suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", script),
      stdout = TRUE, stderr = TRUE,
      env = c(paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)),
              paste0("RETICULATE_PYTHON=", file.path(tempdir(), "no-such-python")),
              paste0("BULKEM_REQUIRE_PYTHON=", require), "PYTHONPATH=")
    ))
  }
  out <- run("1")
  expect_true(any(grepl(paste0("^ANSWER BULKEM_REQUIRE_PYTHON=1 but the Python side is ",
                               "missing: Python could not be started"), out)),
              info = paste(out, collapse = "\n"))
  out <- run("")
  expect_true(any(grepl("^ANSWER FALSE", out)), info = paste(out, collapse = "\n"))
})
