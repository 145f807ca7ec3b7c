# Python's messages in R's terms: dataset positions counted from 1, the R
# functions' argument names, R advice instead of Python's, R quoting.

# terms: list(ids = "position" | "name" | "label", interface = "fit_mixture" |
# "bulkem" | "fit_hmm" | "fit_ssm" | "fit_tmap" | "kalman_loglik" | "state_space"),
# as run_fit(), fit_hmm() and the others record them; NULL: an unnamed list to
# fit_mixture(). Optional: args = c(<Python name> = "<R name>") in place of the
# interface's argument names, and init = "<R argument>" for Python's "init"
# (loglik_at(): "params").
r_message <- function(msg, terms = NULL) {
  ids <- if (is.null(terms$ids)) "position" else terms$ids
  interface <- if (is.null(terms$interface)) "fit_mixture" else terms$interface
  tmap <- identical(interface, "fit_tmap")
  kalman <- identical(interface, "kalman_loglik")
  if (tmap) { # Python's generic messages say "dataset" where TMAP's say "trace"
    msg <- gsub("\\bdatasets\\b", "traces", msg, perl = TRUE)
    msg <- gsub("\\bdataset\\b", "trace", msg, perl = TRUE)
  }
  # the word naming the batch's items: "dataset", a TMAP's "trace", a series
  item <- if (tmap) "trace" else if (kalman) "series" else "dataset"
  if (identical(ids, "position")) {
    msg <- shift_numbers(msg, item)
  } else if (is.list(ids)) { # codes of a factor or text column -> its labels
    msg <- relabel_numbers(msg, item, function(k) paste0("'", ids$levels[k], "'"))
  }
  hmm <- identical(interface, "fit_hmm")
  if (hmm) {
    msg <- shift_numbers(msg, "sequence") # sequences by position, from 1
  }
  if (tmap) {
    msg <- shift_numbers(msg, "run") # runs by position within their trace, from 1
    # orders=(1, 2, 3) or orders=(3,) -> orders = c(1, 2, 3), orders = c(3)
    msg <- gsub("\\borders=\\(([0-9, ]*?),?\\)", "orders = c(\\1)", msg, perl = TRUE)
  }
  if (kalman || identical(interface, "state_space")) {
    msg <- r_kalman_words(msg)
  }
  # init['key'] -> init$key (before the quoting below turns 'key' into "key")
  msg <- gsub("\\binit\\['([A-Za-z_]+)'\\]", "init$\\1", msg, perl = TRUE)
  if (!is.null(terms$init)) { # the R argument holding the values Python calls init
    msg <- gsub("\\binit\\b(?!=)", terms$init, msg, perl = TRUE) # (not fit(init=...))
  }
  original <- identical(interface, "bulkem")
  fixed <- c(
    "DataFrame input" = "The data.frame",
    "numba.cuda.is_available() is False (no CUDA driver or no GPU found)" =
      "no CUDA driver or no GPU was found",
    "Convert the column to numbers (pandas.to_numeric) before fitting." =
      "Convert it to numbers (as.numeric()) before fitting.",
    "Pass a list of 1-D arrays for several datasets." =
      "Pass a list of numeric vectors for several datasets.",
    "pass a list of 1-D arrays, one per dataset." =
      "pass a list of numeric vectors, one per dataset.",
    "strict=True" = "strict = TRUE",
    # checkpoints
    "resume (the same call, or the same `bulkem fit` with --resume)" = "resume (the same call)",
    "checkpoints are Parquet files and need pyarrow: pip install 'bulkem[parquet]'." =
      paste0("checkpoints are Parquet files and need the Python package pyarrow: run ",
             "install_bulkem(extras = \"parquet\") (then restart R), or pip install ",
             "'bulkem[parquet]' into the Python that reticulate uses."),
    "Pass n_symbols= (the number of distinct symbols)" =
      "Pass n_symbols = (the number of distinct symbols, or the symbols as a factor)",
    "see summary.status and summary.message." = if (original) {
      "their fit_success is FALSE and their parameters NA."
    } else {
      "see $summary$status and $summary$message."
    }
  )
  if (original) {
    fixed <- c(fixed,
      "backend='cuda' needs" = "use.gpu = TRUE needs",
      "Use backend='cpu' or backend='auto' to run on the CPU." =
        "Use use.gpu = FALSE (or NA: the GPU when there is one) to run on the CPU.",
      "Pass dataset_col= to name another." = "Name that column \"dataset\".",
      "Pass value_col= to name the column(s) holding the values." =
        "Name the column of the values \"value\".",
      "Pass value_col= to pick one." = "Name the column of the values \"value\".",
      "try more starts or fewer components." =
        "try a larger random.inits or a smaller num.components."
    )
  } else {
    fixed <- c(fixed,
      "(set dataset_col= / sequence_col= to name another)" =
        "(pass dataset_col = \"<column>\" or sequence_col = \"<column>\" to name another)",
      "Pass dataset_col= to name another." =
        "Pass dataset_col = \"<column>\" to name another.",
      "Pass value_col= to name" = "Pass value_col = \"<column>\" to name",
      "Pass value_col= to pick one." = "Pass value_col = \"<column>\" to pick one."
    )
  }
  for (i in seq_along(fixed)) {
    msg <- gsub(names(fixed)[i], fixed[[i]], msg, fixed = TRUE)
  }
  # argument names: Python's -> this R function's
  args <- if (!is.null(terms$args)) {
    terms$args # the caller's own names (loglik_at())
  } else if (original) {
    c(n_components = "num.components", n_starts = "random.inits", max_iter = "max.iters",
      tol = "epsilon")
  } else if (hmm) {
    c(n_components = "components", n_starts = "starts", n_symbols = "symbols")
  } else if (tmap) {
    c(n_starts = "starts", dataset_col = "trace_col")
  } else {
    c(n_components = "components", n_starts = "starts")
  }
  for (i in seq_along(args)) {
    msg <- gsub(paste0("\\b", names(args)[i], "\\b"), args[[i]], msg, perl = TRUE)
  }
  r_quoting(msg)
}

# The Kalman filter's messages in R: time steps from 1, R's matrix notation.
r_kalman_words <- function(msg) {
  hits <- gregexpr("\\btime step [0-9]+ \\(0-based\\)", msg, perl = TRUE)[[1]]
  if (hits[1L] > 0L) {
    found <- regmatches(msg, list(hits))[[1]]
    k <- as.integer(gsub("[^0-9]", "", sub(" (0-based)", "", found, fixed = TRUE)))
    regmatches(msg, list(hits)) <- list(paste("time step", k + 1L))
  }
  msg <- gsub("\\b([A-Za-z][A-Za-z0-9]*)\\.T\\b", "t(\\1)", msg, perl = TRUE)
  msg <- gsub(" @ ", " %*% ", msg, fixed = TRUE)
  msg <- gsub("window=n,", "window = n,", msg, fixed = TRUE)
  gsub("report_error=True", "report_error = TRUE", msg, fixed = TRUE)
}

# "dataset 0" -> "dataset 1": Python counts list positions from 0, R from 1.
shift_dataset_numbers <- function(msg) shift_numbers(msg, "dataset")

# "<word> 0" -> "<word> 1" (word: "dataset", "sequence").
shift_numbers <- function(msg, word) {
  relabel_numbers(msg, word, function(k) k + 1L)
}

# "<word> k" -> "<word> <label(k)>" for every k in msg (one string).
relabel_numbers <- function(msg, word, label) {
  hits <- gregexpr(paste0("\\b", word, " [0-9]+\\b"), msg, perl = TRUE)[[1]]
  if (hits[1L] < 0L) {
    return(msg)
  }
  pieces <- regmatches(msg, list(hits))[[1]]
  numbers <- as.integer(sub(paste0(word, " "), "", pieces, fixed = TRUE))
  regmatches(msg, list(hits)) <- list(paste(word, vapply(numbers, function(k) {
    paste(format(label(k)), collapse = "")
  }, character(1))))
  msg
}

# Python literals as R writes them: ['a', 'b'] -> c("a", "b"), x='y' ->
# x = "y", 'name' -> "name" (quoted words only: apostrophes stay).
r_quoting <- function(msg) {
  word <- "'([A-Za-z0-9_.:+-]*)'"
  list_re <- paste0("\\[(", word, "(, ", word, ")*)\\]")
  msg <- gsub("\\[\\]", "c()", msg)
  hits <- gregexpr(list_re, msg, perl = TRUE)[[1]]
  if (hits[1L] > 0L) {
    found <- regmatches(msg, list(hits))[[1]]
    inner <- substr(found, 2L, nchar(found) - 1L)
    regmatches(msg, list(hits)) <- list(paste0("c(", inner, ")"))
  }
  msg <- gsub("\\b([A-Za-z_][A-Za-z0-9_.]*)=(?=[\"'0-9])", "\\1 = ", msg, perl = TRUE)
  gsub(word, "\"\\1\"", msg, perl = TRUE)
}
