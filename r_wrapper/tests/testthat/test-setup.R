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
