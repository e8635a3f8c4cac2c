#!/usr/bin/env bash
# test/gpu/carry.sh — `make gpu-check`, first half (on the build machine): puts
# what the check runs into $BUILD/gpu-check, stripped, with every library it
# loads that a bare machine may lack, so that the GPU machine (where nothing
# can be installed) only runs test/gpu/check.sh. Layout:
#   bin/   tfvm, modelrun (bench/modelrun.c), mkweights, cublas_sgemm (nvcc)
#   lib/   libtfvm_cuda.so and the shared libraries the programs need beyond
#          the C and C++ runtimes (the CUDA runtime, OpenBLAS, hwloc,
#          protobuf-c, libedit, ...); check.sh puts lib/ on LD_LIBRARY_PATH
#          (searched before the binaries' own rpaths), and tfvm finds
#          libtfvm_cuda.so in ../lib by itself
#   test/  test_devices, test_placement (unit tests: CUDA kernels against the CPU)
#          and the host stand-in they also run on, libtfvm_fakecuda.so
# cuBLAS is not carried (libcublasLt alone is 517 MB): libtfvm_cuda.so finds
# libcublas.so.13 through its rpath to CUDA_HOME/lib64, as the GPU machine's
# own CUDA 13 toolkit has it. Prints nothing unless something fails.
set -eu
BUILD=${BUILD:-build}
G=$BUILD/gpu-check
rm -rf "$G.new"
mkdir -p "$G.new/bin" "$G.new/lib" "$G.new/test"
cp "$BUILD/bin/tfvm" "$BUILD/bench/modelrun" "$G.new/bin/"
cp "$BUILD/test/test_devices" "$BUILD/test/test_placement" "$BUILD/test/libtfvm_fakecuda.so" "$G.new/test/"
${CC:-cc} -O2 -o "$G.new/bin/mkweights" examples/weights/mkweights.c
# the CUDA backend and the cuBLAS reference, when this machine has nvcc
[ ! -f "$BUILD/lib/libtfvm_cuda.so" ] || cp "$BUILD/lib/libtfvm_cuda.so" "$G.new/lib/"
[ ! -f "$BUILD/bench/cublas_sgemm" ] || cp "$BUILD/bench/cublas_sgemm" "$G.new/bin/"
cp -L /usr/lib/x86_64-linux-gnu/libopenblas.so.0 "$G.new/lib/" # dlopen'd at the first matrix product
# the shared libraries of every program, but the C/C++ runtime, CUDA's and ours
libs=$(for f in "$G.new"/bin/* "$G.new"/test/* "$G.new"/lib/*; do ldd "$f" 2>/dev/null; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/libcublas|/libtfvm' || true)
for l in $libs; do
    [ -f "$l" ] && cp -L "$l" "$G.new/lib/"
done
strip --strip-unneeded "$G.new"/bin/* "$G.new"/test/* "$G.new"/lib/* 2>/dev/null || true
rm -rf "$G"
mv "$G.new" "$G"
