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
    if (!isTRUE(ok) && identical(Sys.getenv("BULKEM_REQUIRE_PYTHON"), "1")) {
      # (CI, R CMD check: the examples and tests must not skip their Python part)
      stop("BULKEM_REQUIRE_PYTHON=1 but the Python side is missing: ", reason, call. = FALSE)
    }
    ok
  }
  if (isTRUE(.state$available)) {
    return(answer(TRUE, .state$reason, .state$python, .state$version))
  }
  started <- without_false_poetry(tryCatch(
    reticulate::py_available(initialize = TRUE),
    error = function(e) conditionMessage(e)
  ))
  if (!isTRUE(started)) {
    why <- if (is.character(started)) started else "reticulate found no Python"
    return(answer(FALSE, paste0(
      "Python could not be started: ", why, ". Set RETICULATE_PYTHON to a ",
      "Python where `import bulkem` works, or run install_bulkem()."
    )))
  }
  python <- python_path()
  imported <- tryCatch(import_bulkem(), error = function(e) e)
  if (inherits(imported, "error")) {
    msg <- conditionMessage(imported)
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
        trimws(msg), ". Run install_bulkem() (then restart R), or set RETICULATE_PYTHON ",
        "to a Python where `import bulkem` works (such as .venv/bin/python in the ",
        "repository, made by scripts/demo.sh)."
      )
    }
    return(answer(FALSE, reason, python))
  }
  module <- imported$module
  builtins <- reticulate::import_builtins(convert = FALSE)
  version <- reticulate::py_to_r(builtins$getattr(module, "__version__", "unknown"))
  if (!reticulate::py_has_attr(module, "fit")) {
    where <- reticulate::py_to_r(builtins$getattr(module, "__file__", "an unknown place"))
    return(answer(FALSE, paste0(
      "The bulkem module that the Python at ", python, " imports (from ", where,
      ", version ", version, ") has no fit(); it is too old or incomplete. ",
      "Reinstall it with install_bulkem() (then restart R)."
    ), python, version))
  }
  .state$module <- module
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
  .state$module
}

# Imports the installed Python module even where a folder named "bulkem" (such
# as the R package's own folder inside bulkem.Rcheck/, or a user's project
# folder) lies in the working directory or elsewhere on sys.path: Python takes
# such a folder, having no __init__.py, for a namespace package before it asks
# an editable install's finder, and "bulkem" then has no fit(). Those entries
# are left out of sys.path for this one import. Returns list(module =, hidden =)
# (the folders skipped); an error when no real bulkem module is found.
import_bulkem <- function() {
  if (is.null(.state$importer)) {
    code <- paste(
      "def import_bulkem():",
      "    import importlib, os, sys",
      "    def folder(entry):",
      "        return os.path.join(entry or os.getcwd(), 'bulkem')",
      "    def hides(entry):",
      "        d = folder(entry)",
      "        return os.path.isdir(d) and not os.path.isfile(os.path.join(d, '__init__.py'))",
      "    mod = sys.modules.get('bulkem')",
      "    if mod is not None and getattr(mod, '__file__', None) is not None:",
      "        return mod, []",
      "    for name in [m for m in sys.modules if m == 'bulkem' or m.startswith('bulkem.')]:",
      "        del sys.modules[name]",
      "    saved = list(sys.path)",
      "    hidden = [p for p in saved if isinstance(p, str) and hides(p)]",
      "    sys.path[:] = [p for p in saved if p not in hidden]",
      "    try:",
      "        mod = importlib.import_module('bulkem')",
      "    finally:",
      "        sys.path[:] = saved",
      "    if getattr(mod, '__file__', None) is None:",
      "        raise ModuleNotFoundError(\"No module named 'bulkem' (only a folder named \"",
      "                                  \"bulkem without __init__.py)\")",
      "    return mod, [os.path.abspath(folder(p)) for p in hidden]",
      sep = "\n"
    )
    env <- reticulate::py_run_string(code, local = TRUE, convert = FALSE)
    .state$importer <- reticulate::py_get_item(env, "import_bulkem")
  }
  out <- reticulate::py_call(.state$importer)
  list(
    module = reticulate::py_get_item(out, 0L),
    hidden = as.character(unlist(reticulate::py_to_r(reticulate::py_get_item(out, 1L))))
  )
}

# Calls a Python function; a Python exception becomes an R error, and Python
# warnings become R warnings, their messages said in R's terms (see
# r_message(); `.terms` is list(ids =, interface =), NULL for the defaults).
py_call <- function(fun, ..., .terms = NULL) {
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
    warning(r_message(reticulate::py_str(w$message), .terms), call. = FALSE)
  }
  if (inherits(value, "error")) {
    stop(python_condition(value, .terms))
  }
  value
}

python_condition <- function(e, terms = NULL) {
  last <- tryCatch(reticulate::py_last_error(), error = function(err) NULL)
  if (is.null(last) || is.null(last$type)) {
    return(e)
  }
  type <- as.character(last$type)
  msg <- as.character(last$value)
  if (identical(type, "KeyError")) {
    msg <- sub("^([\"'])(.*)\\1$", "\\2", msg) # str(KeyError) is the repr of its message
  }
  msg <- r_message(msg, terms)
  structure(
    class = c(paste0("bulkem_", type), "bulkem_python_error", "error", "condition"),
    list(message = msg, call = NULL, python_type = type)
  )
}

install_bulkem <- function(path = NULL, envname = "r-bulkem", python = NULL,
                           extras = character(), upgrade = TRUE) {
  spec <- bulkem_pip_spec(path, extras)
  env_python <- with_clean_python_env({
    if (reticulate::virtualenv_exists(envname)) {
      message("Using the existing virtualenv '", envname, "'.")
    } else {
      message("Creating the virtualenv '", envname, "'.")
      reticulate::virtualenv_create(envname, python = python, packages = FALSE)
    }
    env_python <- reticulate::virtualenv_python(envname)
    problem <- pip_problem(env_python)
    if (!is.null(problem)) {
      stop(
        "The Python of '", envname, "' (", env_python, ") cannot run pip over HTTPS: ",
        problem, ". Remove that virtualenv (reticulate::virtualenv_remove(\"", envname,
        "\")) and pass another Python, e.g. install_bulkem(python = \"/usr/bin/python3\").",
        call. = FALSE
      )
    }
    message("Installing ", spec, " into '", envname, "'.")
    pip <- function(...) reticulate::virtualenv_install(envname, packages = c(...),
        pip_options = if (isTRUE(upgrade)) "--upgrade" else character())
    pip("pip") # a pip that reads current package metadata
    pip(spec)
    env_python
  })
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

# Variables that R (or the user, for R) sets and that break a Python started
# from R: R puts the system library folder (e.g. /usr/lib/x86_64-linux-gnu)
# first in LD_LIBRARY_PATH, where a pyenv or self-built Python then loads the
# system's libpython instead of its own; its ssl module fails to load and pip
# cannot reach the package index (it then reports the first package that no
# local index holds as "No matching distribution found").
python_env_drop <- c("LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME")

# Evaluates `code` with python_env_drop unset (for the Python subprocesses it
# starts) and restores them after. R's own libraries are already loaded, so R
# itself is unaffected.
with_clean_python_env <- function(code) {
  old <- Sys.getenv(python_env_drop, unset = NA, names = TRUE)
  Sys.unsetenv(python_env_drop)
  on.exit({
    keep <- old[!is.na(old)]
    if (length(keep)) do.call(Sys.setenv, as.list(keep))
  }, add = TRUE)
  code
}

# Why `python` cannot install packages from the index (its ssl or pip module
# does not load), or NULL when it can.
pip_problem <- function(python) {
  out <- suppressWarnings(system2(python, c("-c", shQuote("import ssl, pip")),
    stdout = TRUE, stderr = TRUE
  ))
  status <- attr(out, "status")
  if (is.null(status) || identical(as.integer(status), 0L)) {
    return(NULL)
  }
  last <- utils::tail(out[nzchar(trimws(out))], 1L)
  if (length(last)) trimws(last) else paste("exit status", status)
}

# reticulate (< 1.29) reads a pyproject.toml with any [tool] table as a Poetry
# project and warns that it cannot find 'poetry'. bulkem's own repository has
# such a file and is no Poetry project: while inside it, and unless the user
# named a Poetry project, reticulate is pointed at a folder without one.
without_false_poetry <- function(code) {
  if (!is.null(getOption("reticulate.poetry.project"))) {
    return(code)
  }
  tree <- find_source_tree(getwd())
  if (is.null(tree) ||
    any(grepl("^\\[tool\\.poetry", readLines(file.path(tree, "pyproject.toml"), warn = FALSE)))) {
    return(code)
  }
  old <- options(reticulate.poetry.project = tempdir())
  on.exit(options(old), add = TRUE)
  code
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
