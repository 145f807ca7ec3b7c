"""Around the package: the command line, the R bridge, plots, shipped datasets."""
