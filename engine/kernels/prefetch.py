"""Software prefetch of one array element from inside a kernel: ``prefetch(array, index, write)``.

A loop whose loads land on random cache lines of a table larger than the core's caches (a shuffle's
swaps, a piece cache's probes) waits on each miss in turn unless the addresses are known early.
Where they are, the loop issues ``prefetch`` for the line it will need some steps later; the loads
then find it on its way. ``llvm.prefetch`` neither loads nor faults, so any index inside the array
is safe; ``index`` is an integer (1-D) or a tuple of integers (one per dimension); ``write`` a
literal bool: prefetch to write (True) or to read (False).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from engine.numba_internals import get_item_pointer, get_or_insert_function

__all__ = ["prefetch"]


@intrinsic
def prefetch(typingctx, array, index, write):
    """Emit ``llvm.prefetch`` (high locality) for ``array[index]``: to write when ``write`` is True."""
    if not isinstance(write, types.BooleanLiteral):
        return None  # the kind of prefetch is fixed where it is compiled
    for_write = int(write.literal_value)
    signature = types.void(array, index, write)

    def codegen(context, builder, sig, args):
        array_type, index_type, _ = sig.args
        array_struct = context.make_array(array_type)(context, builder, args[0])
        if isinstance(index_type, types.BaseTuple):
            indices = [builder.extract_value(args[1], i) for i in range(len(index_type))]
        else:
            indices = [args[1]]
        pointer = get_item_pointer(context, builder, array_type, array_struct, indices, wraparound=False,
                                   boundscheck=False)
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32])
        function = get_or_insert_function(builder.module, function_type, "llvm.prefetch.p0")
        builder.call(function, [builder.bitcast(pointer, byte_pointer), int32(for_write), int32(3), int32(1)])
        return context.get_dummy_value()

    return signature, codegen
