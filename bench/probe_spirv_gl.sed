# glslang's cooperative-matrix SPIR-V, rewritten for OpenGL (see
# bench/probe_spirv_coop.comp): the GLSL450 memory model, buffers in the
# Uniform class with BufferBlock, no visibility operands.
/OpCapability VulkanMemoryModel/d
/OpExtension "SPV_KHR_vulkan_memory_model"/d
/OpExtension "SPV_KHR_storage_buffer_storage_class"/d
s/OpMemoryModel Logical Vulkan/OpMemoryModel Logical GLSL450/
s/ MakePointer\(Available\|Visible\)|NonPrivatePointer %[a-z_0-9]*//
s/ NonPrivatePointer//
s/StorageBuffer/Uniform/g
s/\(OpDecorate %[A-Za-z_0-9]* \)Block$/\1BufferBlock/
