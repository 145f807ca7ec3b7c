# The Python module, bound lazily: the package loads (and its help pages,
# bulkem_available() and install_bulkem() work) before any Python is set up.
# convert = FALSE because every conversion is done by hand in convert.R: the
# automatic numpy/pandas conversions of older reticulate releases fail on
# numpy >= 2 and pandas >= 3.
bulkem_py <- NULL

.onLoad <- function(libname, pkgname) {
  # A virtualenv named "r-bulkem" (what install_bulkem() creates) is
  # preferred unless RETICULATE_PYTHON or use_python() chose another Python.
  bulkem_py <<- reticulate::import(
    "bulkem",
    convert = FALSE,
    delay_load = list(environment = "r-bulkem")
  )
}
