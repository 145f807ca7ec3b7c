# Setting up, finding and calling the Python side.
.state <- new.env(parent = emptyenv())

python_path <- function() {
  if (!reticulate::py_available(initialize = FALSE)) {
    return(NA_character_)
  }
  tryCatch(reticulate::py_config()$python, error = function(e) NA_character_)
}

bulkem_available <- function(verbose = FALSE) {
  answer <- function(ok, reason, python = NA_character_, version = NA_character_) {
    attr(ok, "reason") <- reason
    attr(ok, "python") <- python
    attr(ok, "version") <- version
    if (isTRUE(verbose)) {
      message(reason)
    }
    ok
  }
  if (isTRUE(.state$available)) {
    return(answer(TRUE, .state$reason, .state$python, .state$version))
  }
  started <- tryCatch(
    reticulate::py_available(initialize = TRUE),
    error = function(e) conditionMessage(e)
  )
  if (!isTRUE(started)) {
    why <- if (is.character(started)) started else "reticulate found no Python"
    return(answer(FALSE, paste0(
      "Python could not be started: ", why, ". Set RETICULATE_PYTHON to a ",
      "Python where `import bulkem` works, or run install_bulkem()."
    )))
  }
  python <- python_path()
  module <- tryCatch(
    reticulate::import("bulkem", convert = FALSE),
    error = function(e) e
  )
  if (inherits(module, "error")) {
    msg <- conditionMessage(module)
    missing <- grepl("No module named 'bulkem'", msg, fixed = TRUE) ||
      grepl("not found", msg, fixed = TRUE)
    reason <- if (missing) {
      paste0(
        "The Python at ", python, " has no module 'bulkem'. Run install_bulkem() ",
        "(then restart R), or set RETICULATE_PYTHON to a Python where ",
        "`import bulkem` works."
      )
    } else {
      paste0(
        "The Python at ", python, " failed to import bulkem: ",
        trimws(msg), ". Reinstall it with install_bulkem()."
      )
    }
    return(answer(FALSE, reason, python))
  }
  builtins <- reticulate::import_builtins(convert = FALSE)
  version <- reticulate::py_to_r(builtins$getattr(module, "__version__", "unknown"))
  if (!reticulate::py_has_attr(module, "fit")) {
    return(answer(FALSE, paste0(
      "The bulkem module found at ", python, " (version ", version,
      ") has no fit(); it is too old or incomplete. Reinstall it with install_bulkem()."
    ), python, version))
  }
  reason <- paste0("bulkem ", version, " found in the Python at ", python)
  .state$available <- TRUE
  .state$reason <- reason
  .state$python <- python
  .state$version <- version
  answer(TRUE, reason, python, version)
}

bulkem_module <- function() {
  ok <- bulkem_available()
  if (!isTRUE(ok)) {
    stop(attr(ok, "reason"), call. = FALSE)
  }
  bulkem_py
}

# Calls a Python function; a Python exception becomes an R error whose
# message is the Python message, and Python warnings become R warnings.
py_call <- function(fun, ...) {
  warnings_mod <- reticulate::import("warnings", convert = FALSE)
  catcher <- warnings_mod$catch_warnings(record = TRUE)
  caught <- catcher$`__enter__`()
  exited <- FALSE
  on.exit(if (!exited) catcher$`__exit__`(NULL, NULL, NULL), add = TRUE)
  warnings_mod$simplefilter("always")
  reticulate::py_clear_last_error()
  value <- tryCatch(fun(...), error = function(e) e)
  catcher$`__exit__`(NULL, NULL, NULL)
  exited <- TRUE
  n_warn <- reticulate::py_len(caught)
  for (i in seq_len(n_warn)) {
    w <- reticulate::py_get_item(caught, i - 1L)
    origin <- reticulate::py_to_r(w$category$`__module__`)
    if (startsWith(origin, "numba")) {
      next # compiler notes, not about the user's data
    }
    warning(reticulate::py_str(w$message), call. = FALSE)
  }
  if (inherits(value, "error")) {
    stop(python_condition(value))
  }
  value
}

python_condition <- function(e) {
  last <- tryCatch(reticulate::py_last_error(), error = function(err) NULL)
  if (is.null(last) || is.null(last$type)) {
    return(e)
  }
  type <- as.character(last$type)
  msg <- as.character(last$value)
  structure(
    class = c(paste0("bulkem_", type), "bulkem_python_error", "error", "condition"),
    list(message = msg, call = NULL, python_type = type)
  )
}

install_bulkem <- function(path = NULL, envname = "r-bulkem", python = NULL,
                           extras = character(), upgrade = TRUE) {
  spec <- bulkem_pip_spec(path, extras)
  if (reticulate::virtualenv_exists(envname)) {
    message("Using the existing virtualenv '", envname, "'.")
  } else {
    message("Creating the virtualenv '", envname, "'.")
    reticulate::virtualenv_create(envname, python = python)
  }
  message("Installing ", spec, " into '", envname, "'.")
  pip_options <- if (isTRUE(upgrade)) "--upgrade" else character()
  reticulate::virtualenv_install(envname, packages = spec, pip_options = pip_options)
  env_python <- reticulate::virtualenv_python(envname)
  current <- python_path()
  if (!is.na(current) && normalizePath(current, mustWork = FALSE) !=
    normalizePath(env_python, mustWork = FALSE)) {
    message(
      "This R session already runs the Python at ", current,
      "; restart R to use '", envname, "'."
    )
  } else {
    message("Done. bulkem will use ", env_python, " (restart R if it was in use).")
  }
  invisible(env_python)
}

# What to hand pip: a local source tree (made absolute) or a pip requirement.
bulkem_pip_spec <- function(path = NULL, extras = character()) {
  if (is.null(path)) {
    path <- Sys.getenv("BULKEM_SOURCE", unset = "")
    if (!nzchar(path)) {
      path <- find_source_tree(getwd())
    }
    if (is.null(path) || !nzchar(path)) {
      stop(
        "No bulkem source given. Pass the path of the bulkem repository ",
        "(the folder holding pyproject.toml), e.g. install_bulkem(\"~/src/bulkem\"), ",
        "a pip requirement, or set the BULKEM_SOURCE environment variable.",
        call. = FALSE
      )
    }
  }
  if (!is.character(path) || length(path) != 1L || is.na(path)) {
    stop("`path` must be one string, got ", deparse(path), call. = FALSE)
  }
  extra <- if (length(extras)) paste0("[", paste(extras, collapse = ","), "]") else ""
  if (dir.exists(path)) {
    path <- normalizePath(path)
    if (!file.exists(file.path(path, "pyproject.toml"))) {
      stop("The folder ", path, " holds no pyproject.toml; expected the ",
        "bulkem repository.",
        call. = FALSE
      )
    }
    return(paste0(path, extra))
  }
  paste0(path, extra)
}

find_source_tree <- function(from) {
  dir <- normalizePath(from, mustWork = FALSE)
  repeat {
    toml <- file.path(dir, "pyproject.toml")
    if (file.exists(toml) &&
      any(grepl("^name\\s*=\\s*\"bulkem\"", readLines(toml, warn = FALSE)))) {
      return(dir)
    }
    parent <- dirname(dir)
    if (identical(parent, dir)) {
      return(NULL)
    }
    dir <- parent
  }
}
