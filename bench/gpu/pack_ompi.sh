#!/usr/bin/env bash
# A relocatable copy of this machine's Open MPI runtime (Debian 12: Open MPI 4.1 with the
# external PMIx of libpmix2), for the GPU machine, which has no MPI: there MPI_Init fails
# in opal_init without Open MPI's MCA components, and no mpirun exists
# (docs/gpu.md, "The GPU proof").
#
#   bench/gpu/pack_ompi.sh STAGE
#
# writes STAGE/ompi/usr, laid out as /usr is here (so that OPAL_PREFIX=STAGE/ompi/usr
# relocates Open MPI and PMIX_INSTALL_PREFIX=STAGE/ompi/usr/lib/x86_64-linux-gnu/pmix2
# relocates PMIx):
#   bin/orterun, bin/orted, bin/mpirun -> orterun
#   lib/x86_64-linux-gnu/openmpi/lib/openmpi3/   the MCA components, without the transports
#                                                the GPU machine lacks (UCX, OFI/libfabric,
#                                                verbs/openib, PSM, CUDA-aware smcuda)
#   lib/x86_64-linux-gnu/pmix2/{lib/pmix,share/pmix}   PMIx's components and help files
#   share/openmpi/                               Open MPI's help files
# and appends to STAGE/ompi/needs.txt the shared libraries the programs and the kept
# components load (ldd, one path a line), for bench/gpu/proof.sh build to carry in
# STAGE/lib with those of the test binaries. Used by proof.sh with the environment it
# sets (ompi_env there): OPAL_PREFIX, PMIX_INSTALL_PREFIX,
# PMIX_MCA_mca_base_component_path, OMPI_MCA_ess_singleton_isolated=1 (MPI_Init of a
# process started without mpirun does not start an orted), pml ob1 and btl self,vader.
set -euo pipefail
[ $# -eq 1 ] || { echo "usage: bench/gpu/pack_ompi.sh STAGE" >&2; exit 2; }
A=x86_64-linux-gnu
SRC_OMPI=/usr/lib/$A/openmpi
SRC_PMIX=/usr/lib/$A/pmix2
for f in /usr/bin/orterun /usr/bin/orted "$SRC_OMPI/lib/openmpi3" "$SRC_PMIX/lib/pmix" /usr/share/openmpi; do
  [ -e "$f" ] || { echo "pack_ompi.sh: $f not found (Debian's openmpi-bin, libopenmpi3 and libpmix2 expected)" >&2; exit 2; }
done
P=$1/ompi/usr
rm -rf "$1/ompi"
mkdir -p "$P/bin" "$P/lib/$A/openmpi/lib" "$P/lib/$A/pmix2/lib" "$P/lib/$A/pmix2/share" "$P/share"
cp -L /usr/bin/orterun /usr/bin/orted "$P/bin/"
ln -s orterun "$P/bin/mpirun"
cp -rL "$SRC_OMPI/lib/openmpi3" "$P/lib/$A/openmpi/lib/"
cp -rL "$SRC_PMIX/lib/pmix" "$P/lib/$A/pmix2/lib/"
[ -d "$SRC_PMIX/share/pmix" ] && cp -rL "$SRC_PMIX/share/pmix" "$P/lib/$A/pmix2/share/"
cp -rL /usr/share/openmpi "$P/share/"
# Transports the GPU machine lacks (and whose libraries we would otherwise carry).
find "$P/lib/$A/openmpi/lib/openmpi3" -name '*.so' -regextype egrep \
  -regex '.*_(ucx|ofi|openib|verbs|psm|psm2|portals4|usnic|ucc|hcoll|fca|smcuda|cuda)\.so' -delete
# What they load: every library ldd resolves for the programs and the kept components.
{
  for f in "$P/bin/orterun" "$P/bin/orted" $(find "$P/lib" -name '*.so'); do
    ldd "$f" | awk '/=> \// {print $3}'
  done
} | sort -u >>"$1/ompi/needs.txt"
echo "pack_ompi.sh: $(find "$P/lib/$A/openmpi/lib/openmpi3" -name '*.so' | wc -l) MCA components," \
  "$(sort -u "$1/ompi/needs.txt" | wc -l) libraries needed, $(du -sh "$1/ompi" | cut -f1) unpacked"
