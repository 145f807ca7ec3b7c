# The R block of the repository's README.md runs as pasted.
readme_r_blocks <- function() {
  root <- bulkem:::find_source_tree(getwd())
  if (is.null(root) || !file.exists(file.path(root, "README.md"))) {
    return(NULL)
  }
  lines <- readLines(file.path(root, "README.md"), warn = FALSE)
  starts <- which(lines == "```r")
  ends <- which(lines == "```")
  lapply(starts, function(s) lines[(s + 1L):(min(ends[ends > s]) - 1L)])
}

test_that("the README's R block runs as pasted", {
  skip_if_no_bulkem()
  blocks <- readme_r_blocks()
  skip_if(is.null(blocks), "README.md not found (the tests run outside the repository)")
  expect_gte(length(blocks), 1L)
  path <- tempfile(fileext = ".png")
  grDevices::png(path)
  on.exit(grDevices::dev.off(), add = TRUE)
  env <- new.env(parent = globalenv())
  for (code in blocks) {
    # fits that stop at max_iter (the README keeps the default) warn, as they should
    out <- utils::capture.output(
      suppressWarnings(classes = "bulkem_not_converged",
        suppressMessages(eval(parse(text = code), envir = env))),
      type = "output"
    )
  }
  expect_s3_class(env$fit, "bulkem_fit")
  expect_identical(env$fit$summary$dataset, c("a", "b"))
  expect_length(env$fits, 2L)
  expect_true(all(env$fit$summary$status %in% c("converged", "max_iter")))
  expect_s3_class(env$hmm, "bulkem_hmm")
  expect_identical(env$hmm$summary$dataset, c("a", "b"))
})
