library(testthat)
library(bulkem)

test_check("bulkem")
