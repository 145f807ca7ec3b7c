"""How fits run: the shared EM driver, the CPU engine and the CUDA engine."""
