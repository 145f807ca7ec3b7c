# Skips a test when the Python side is truly absent, saying why. With
# BULKEM_REQUIRE_PYTHON=1 (set by scripts/test_r.sh) a missing Python side is
# an error instead, so that skips cannot hide every test in CI.
skip_if_no_bulkem <- function() {
  ok <- bulkem_available()
  if (isTRUE(ok)) {
    return(invisible(TRUE))
  }
  if (nzchar(Sys.getenv("BULKEM_REQUIRE_PYTHON"))) {
    stop("BULKEM_REQUIRE_PYTHON is set but ", attr(ok, "reason"))
  }
  skip(paste("Python module bulkem not available:", attr(ok, "reason")))
}

py_bulkem <- function() reticulate::import("bulkem", convert = FALSE)

# A pandas column as a plain R vector, straight from Python (independent of
# the package's own conversion code).
py_col <- function(frame, name) {
  values <- reticulate::py_to_r(reticulate::py_get_item(frame, name)$tolist())
  values <- lapply(values, function(v) if (is.null(v)) NA else v)
  unlist(values)
}

# Demo data drawn in Python; the same float64 values in R and in Python.
demo_data <- function(n_datasets = 3L, n_obs = 300L, seed = 11L) {
  py <- py_bulkem()$datasets$simulate_demo(n_datasets, n_obs, seed)
  r <- lapply(seq_len(n_datasets), function(i) {
    as.double(unlist(reticulate::py_to_r(reticulate::py_get_item(py, i - 1L)$tolist())))
  })
  list(r = r, py = py)
}

# Evaluates `code` with the working directory set to `dir`.
withr_local_wd <- function(dir, code) {
  old <- setwd(dir)
  on.exit(setwd(old), add = TRUE)
  code
}

# An AR(1) series with phi = 0.7 observed with noise of sd 0.5 (R's random numbers).
ar1_noise <- function(n, phi = 0.7) {
  z <- numeric(n)
  for (t in 2:n) z[t] <- phi * z[t - 1] + stats::rnorm(1)
  z + stats::rnorm(n, sd = 0.5)
}

# Runs `lines` (R code) in a new R session with this one's library paths and
# environment, plus `env` (NAME=value).
run_new_session <- function(lines, env = character()) {
  script <- tempfile(fileext = ".R")
  on.exit(unlink(script), add = TRUE)
  writeLines(lines, script)
  suppressWarnings(system2(file.path(R.home("bin"), "Rscript"), c("--vanilla", script),
    stdout = TRUE, stderr = TRUE,
    env = c(paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)), env)
  ))
}
